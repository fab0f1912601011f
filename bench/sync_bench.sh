#!/usr/bin/env bash
# Training step time on CPU with 2 ranks (issue 4's benchmark): Ember's gradient sync
# against PyTorch DDP, same models, batch, optimizer (Adam) and synthetic data, one
# intra-op thread per rank:
#   - Ember ModelSync (one coalesced all-reduce after backward) and Ember DataParallel
#     (buckets queued from gradient hooks during backward) over shared memory from a
#     private emberd, and ModelSync over Gloo bootstrapped through it: bench/sync_bench
#     under ember-run;
#   - PyTorch DDP over gloo: bench/ddp_baseline.py;
#   - for context, no sync at all: 2 ranks training on their own (sync_bench --sync none
#     under ember-run: the same competition for the cores, so the difference to it is
#     what syncing costs), 2 ranks kept in lockstep without moving gradients (--sync
#     barrier: a one-float all-reduce per step, so the difference between it and none is
#     what waiting for each other costs, and between ModelSync and it what moving the
#     gradients costs), and 1 rank in C++ and in Python (ddp_baseline.py --ranks 1
#     --no-ddp).
# Models: the example CNN (sdk/examples/fashion_cnn) and ResNet-18 in its CIFAR form
# (bench/models/resnet18). The runs are interleaved: ROUNDS rounds, each running every
# configuration once in an order rotated by the round; the table gives, per
# configuration, the median over rounds of each run's median step time (ms, rank 0), and
# each ratio as the median over rounds of that round's ratio (runs minutes apart share
# less of this VM's drift than runs of different rounds).
# Appends the table to bench/results/sync_cpu.md and every run's line to
# bench/results/sync_cpu.jsonl.
#
# Every process runs with glibc's malloc thresholds fixed (GLIBC_TUNABLES: mmap threshold
# 32 MiB, trim threshold 4 GiB), so that per-step activations and gradients stay in the
# heap: left to glibc's adaptive thresholds, whether a process re-faults them every step
# (up to 40,000 page faults and 10% of a ResNet-18 step here) depends on its allocation
# history, which differs between the C++ and Python processes and from run to run, and
# would swamp the sync being measured. --default-malloc leaves glibc's defaults.
#
#   bench/sync_bench.sh [--rounds 3] [--cnn-batch 64] [--resnet-batch 32]
#                       [--cnn-steps 40] [--resnet-steps 6] [--default-malloc]
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
cnn_batch=64
resnet_batch=32
cnn_steps=40
resnet_steps=6
malloc_tunables="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --cnn-batch) cnn_batch="$2"; shift 2 ;;
    --resnet-batch) resnet_batch="$2"; shift 2 ;;
    --cnn-steps) cnn_steps="$2"; shift 2 ;;
    --resnet-steps) resnet_steps="$2"; shift 2 ;;
    --default-malloc) malloc_tunables=""; shift ;;
    *) echo "sync_bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
command_line="bench/sync_bench.sh --rounds ${rounds} --cnn-batch ${cnn_batch}"
command_line+=" --resnet-batch ${resnet_batch} --cnn-steps ${cnn_steps} --resnet-steps ${resnet_steps}"
if [[ -z "${malloc_tunables}" ]]; then command_line+=" --default-malloc"; fi

bazel build //daemon:emberd //tools/emberctl:emberctl //tools/ember_run:ember-run //bench:sync_bench \
  >/dev/null
# shellcheck source=bench/lib.sh
source bench/lib.sh
make_bench_tmp
start_daemon "${tmp}"
if [[ -n "${malloc_tunables}" ]]; then export GLIBC_TUNABLES="${malloc_tunables}"; fi
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started="$(date +%s)"

runs="${tmp}/runs.jsonl"
order="${tmp}/rounds.txt"  # line i: the round of runs.jsonl's line i
# One run of configuration $2 for model $1.
run_one() {
  local model="$1" impl="$2" batch steps warmup
  if [[ "${model}" == cnn ]]; then batch="${cnn_batch}" steps="${cnn_steps}" warmup=5
  else batch="${resnet_batch}" steps="${resnet_steps}" warmup=2; fi
  local common=(--model "${model}" --batch-size "${batch}" --steps "${steps}" --warmup "${warmup}"
                --threads 1 --optimizer adam --json "${runs}")
  case "${impl}" in
    ember_model_sync | ember_data_parallel)
      bazel-bin/tools/ember_run/ember-run --nproc 2 --socket "${tmp}/emberd.sock" -- \
        bazel-bin/bench/sync_bench --sync "${impl#ember_}" "${common[@]}" ;;
    ember_model_sync_gloo)
      bazel-bin/tools/ember_run/ember-run --nproc 2 --socket "${tmp}/emberd.sock" -- \
        bazel-bin/bench/sync_bench --sync model_sync --collectives gloo "${common[@]}" ;;
    ember_none_2)
      bazel-bin/tools/ember_run/ember-run --nproc 2 --socket "${tmp}/emberd.sock" -- \
        bazel-bin/bench/sync_bench --sync none "${common[@]}" ;;
    ember_barrier)
      bazel-bin/tools/ember_run/ember-run --nproc 2 --socket "${tmp}/emberd.sock" -- \
        bazel-bin/bench/sync_bench --sync barrier "${common[@]}" ;;
    ember_none_1) bazel-bin/bench/sync_bench --sync none "${common[@]}" ;;
    torch_ddp) bench/ddp_baseline.py --ranks 2 "${common[@]}" ;;
    torch_none_1) bench/ddp_baseline.py --ranks 1 --no-ddp "${common[@]}" ;;
  esac | grep -E '^(sync_bench|ddp_baseline|rank 0):'
}

impls=(ember_model_sync ember_data_parallel ember_model_sync_gloo torch_ddp ember_barrier
       ember_none_2 ember_none_1 torch_none_1)
for ((round = 0; round < rounds; ++round)); do
  for model in cnn resnet18; do
    for ((i = 0; i < ${#impls[@]}; ++i)); do
      impl="${impls[$(((i + round) % ${#impls[@]}))]}"
      echo "== round $((round + 1))/${rounds}: ${model} ${impl}"
      run_one "${model}" "${impl}"
      echo "${round}" >>"${order}"
    done
  done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
elapsed=$(($(date +%s) - started))

mkdir -p bench/results
cat "${runs}" >>bench/results/sync_cpu.jsonl
{
  echo
  commit="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  git diff --quiet HEAD -- . ':(exclude)bench/results' 2>/dev/null || commit+=" + uncommitted changes"
  echo "## $(date -u +%Y-%m-%dT%H:%MZ) — $(machine), commit ${commit}"
  echo
  echo "\`${command_line}\` (${elapsed} s; load average before ${load_before}," \
    "after ${load_after}; GLIBC_TUNABLES=${malloc_tunables:-unset})"
  echo
  /usr/bin/python3 - "${runs}" "${order}" <<'PY'
import collections, json, statistics, sys

runs = collections.defaultdict(list)  # (model, configuration) -> records
rounds = [int(line) for line in open(sys.argv[2], encoding="utf-8")]
records = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
if len(records) != len(rounds):
    sys.exit(f"sync_bench: {len(records)} results for {len(rounds)} runs")
for record, round_ in zip(records, rounds):
    configuration = record["impl"]
    if configuration.endswith("_none"):
        configuration += f"_{record['ranks']}"
    record["round"] = round_
    runs[(record["model"], configuration)].append(record)

def median(model, configuration, field="step_ms_median"):
    return statistics.median(r[field] for r in runs[(model, configuration)])

def ratio(model, configuration, reference):
    """The median over rounds of configuration / reference within each round."""
    by_round = {r["round"]: r["step_ms_median"] for r in runs[(model, reference)]}
    return statistics.median(r["step_ms_median"] / by_round[r["round"]]
                             for r in runs[(model, configuration)] if r["round"] in by_round)

print("Step time, ms (median over rounds of each run's median step on rank 0), 1 thread per "
      "rank, Adam; ratios: median over rounds of the round's ratio; no sync: each rank on its "
      "own")
print()
print("| model | params | batch/rank | Ember ModelSync | Ember DataParallel | PyTorch DDP "
      "| ModelSync / DDP | DataParallel / DDP | ModelSync on Gloo / DDP | lockstep only, 2 ranks "
      "| no sync, 2 ranks | no sync, 1 rank: C++ | no sync, 1 rank: Python |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
models = sorted({model for model, _ in runs}, key=lambda m: m != "cnn")
for model in models:
    params = {r["params"] for (m, _), rs in runs.items() if m == model for r in rs}
    if len(params) != 1:
        sys.exit(f"sync_bench: {model} has different parameter counts: {sorted(params)}")
    batch = runs[(model, "torch_ddp")][0]["batch"]
    ms, dp, gloo, ddp = (median(model, c) for c in ("ember_model_sync", "ember_data_parallel",
                                                   "ember_model_sync_gloo", "torch_ddp"))
    print(f"| {model} | {params.pop():,} | {batch} | {ms:.1f} | {dp:.1f} | {ddp:.1f} "
          f"| {ratio(model, 'ember_model_sync', 'torch_ddp'):.2f}x "
          f"| {ratio(model, 'ember_data_parallel', 'torch_ddp'):.2f}x "
          f"| {ratio(model, 'ember_model_sync_gloo', 'torch_ddp'):.2f}x "
          f"| {median(model, 'ember_barrier'):.1f} | {median(model, 'ember_none_2'):.1f} "
          f"| {median(model, 'ember_none_1'):.1f} | {median(model, 'torch_none_1'):.1f} |")
print()
print("Phases, ms per step (median over rounds of per-run means; backward includes "
      "DataParallel's and DDP's all-reduces, sync is ModelSync::AverageGradients); rank 0's "
      "process CPU time (all threads) and minor page faults per step")
print()
print("| model | run | step (mean) | forward | backward | sync | optimizer | CPU | page faults |")
print("|---|---|---|---|---|---|---|---|---|")
for model in models:
    for configuration in ("ember_model_sync", "ember_data_parallel", "ember_model_sync_gloo",
                          "torch_ddp", "ember_barrier", "ember_none_2", "ember_none_1",
                          "torch_none_1"):
        cells = [median(model, configuration, f) for f in
                 ("step_ms_mean", "forward_ms", "backward_ms", "sync_ms", "optimizer_ms", "cpu_ms")]
        print(f"| {model} | {configuration} | " + " | ".join(f"{c:.1f}" for c in cells)
              + f" | {median(model, configuration, 'page_faults'):.0f} |")
PY
} | tee -a bench/results/sync_cpu.md
