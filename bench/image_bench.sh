#!/usr/bin/env bash
# The image pipeline at the decode limit, side by side in one run (issue 3's benchmark):
#   - decode limit: bench/decode_limit, one process per core decoding + cropping the same
#     files with emberd's own code, files in memory, no loader;
#   - Ember: bench/loader_bench (emberd + R readers) on the folder, and on its packed copy;
#   - PyTorch DataLoader: torchvision ImageFolder + RandomResizedCrop(224) + flip +
#     ToTensor, R ranks x 2 workers;
#   - data stall: Ember readers that spend 50 ms per batch (sleeping, as a GPU step;
#     then busy, as a CPU step) and the fraction of their time spent waiting for data.
# All with configs/pipelines/imagenet_train.yaml, batch B, R ranks. Memory: peak PSS
# summed over every process of a run. The first three are interleaved: ROUNDS rounds,
# each running limit, Ember (folder, packed) and the DataLoader once, so that a slow
# spell of the machine hits all of them; the table gives medians over rounds (ratios:
# the median of each round's ratio) and the CPU time the VM lost to steal. Appends the
# table to bench/results/images.md.
#
# The ranks only receive their batches (a GPU trainer's copy from Ember's registered ring
# is DMA and costs no CPU); with --touch the ranks of both loaders also read every byte
# of every batch, as a CPU training step would.
#
#   bench/image_bench.sh [--dir DIR] [--count 2000] [--ranks 2] [--batch-size 64]
#                        [--seconds 10] [--rounds 3] [--touch]
# Without --dir, a folder of COUNT JPEGs (256x256, from Fashion-MNIST) is generated.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=""
count=2000
ranks=2
batch=64
seconds=10
rounds=3
touch=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --count) count="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --touch) touch=(--touch); shift ;;
    *) echo "image_bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

bazel build //daemon:emberd //tools/emberctl:emberctl //bench:decode_limit //bench:loader_bench \
  >/dev/null
# shellcheck source=bench/lib.sh
source bench/lib.sh
make_bench_tmp
if [[ -z "${dir}" ]]; then
  dir="${tmp}/jpegs"
  bench/make_jpeg_folder.py "${dir}" --count "${count}"
fi
pipeline=configs/pipelines/imagenet_train.yaml
value() { sed -n "s/^$1=\\([0-9.]*\\).*/\\1/p"; }

steal_ticks() { awk '/^cpu / {print $9}' /proc/stat; }
cpu_ticks() { awk '/^cpu / {s = 0; for (i = 2; i <= 9; ++i) s += $i; print s}' /proc/stat; }

start_daemon "${tmp}"
"${ctl[@]}" dataset add images --format imagefolder --path "${dir}" --pipeline "${pipeline}" >/dev/null
"${ctl[@]}" pack "${dir}" "${tmp}/images.packed" --quiet
"${ctl[@]}" dataset add images-packed --format packed --path "${tmp}/images.packed" \
  --pipeline "${pipeline}" >/dev/null

# One line per run: "<round> <run> <images/s> <peak PSS MiB>".
runs="${tmp}/runs.txt"
: >"${runs}"
record() {
  if [[ -z "$3" || -z "$4" ]]; then
    echo "image_bench: no images/s or PSS from the $2 run of round $1; its output:" >&2
    echo "${out}" >&2
    exit 1
  fi
  echo "$1 $2 $3 $4" >>"${runs}"
}
steal_before="$(steal_ticks)" cpu_before="$(cpu_ticks)"
for ((round = 1; round <= rounds; ++round)); do
  echo "== round ${round}/${rounds}: decode limit ($(nproc) processes)"
  out="$(bazel-bin/bench/decode_limit --dir "${dir}" --pipeline "${pipeline}" --seconds "${seconds}")"
  echo "${out}"
  record "${round}" limit "$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' <<<"${out}")" 0

  extra_pids="${daemon_pid}"
  for name in images images-packed; do
    echo "== round ${round}/${rounds}: Ember ${name}"
    out="$(peak_pss_of "${loader_bench[@]}" "${name}" --ranks "${ranks}" --batch-size "${batch}" \
      --seconds "${seconds}" "${touch[@]}" 3>"${tmp}/pss")"
    echo "${out}" | tail -n 1
    record "${round}" "${name}" "$(sed -n 's/^bench: samples_per_s=\([0-9.]*\).*/\1/p' <<<"${out}")" \
      "$(cat "${tmp}/pss")"
  done
  extra_pids=""

  # Debian's torch 1.13 DataLoader now and then loses a worker to an abort ("terminate
  # called without an active exception"), which fails the run: one retry.
  for attempt in 1 2; do
    echo "== round ${round}/${rounds}: PyTorch DataLoader, ${ranks} ranks x 2 workers"
    out="$(peak_pss_of bench/dataloader_baseline.py --imagefolder "${dir}" --ranks "${ranks}" \
      --batch-size "${batch}" --workers 2 --seconds "${seconds}" "${touch[@]}" 3>"${tmp}/pss" 2>&1)"
    grep -q '^baseline: samples_per_s=' <<<"${out}" && break
    echo "image_bench: the DataLoader run failed (attempt ${attempt}):" >&2
    echo "${out}" | tail -n 5 >&2
  done
  echo "${out}" | tail -n 1
  record "${round}" dataloader "$(sed -n 's/^baseline: samples_per_s=\([0-9.]*\).*/\1/p' <<<"${out}")" \
    "$(cat "${tmp}/pss")"
done
steal="$(awk -v s="$(($(steal_ticks) - steal_before))" -v c="$(($(cpu_ticks) - cpu_before))" \
  'BEGIN { printf "%.1f%%", 100 * s / c }')"

declare -A stall
for kind in sleep busy; do
  flag=()
  [[ "${kind}" == busy ]] && flag=(--busy-compute)
  out="$("${loader_bench[@]}" images --ranks "${ranks}" --batch-size "${batch}" --seconds "${seconds}" \
    --compute-ms 50 --touch "${flag[@]}")"
  stall[${kind}]="$(sed -n 's/^data wait: \([0-9.]*\).*/\1/p' <<<"${out}")"
  echo "== data wait with 50 ms ${kind} steps: ${stall[${kind}]}"
done
stop_daemon

mkdir -p bench/results
{
  echo
  echo "## $(date -u +%Y-%m-%dT%H:%MZ) — $(machine)"
  echo
  echo "\`bench/image_bench.sh --count ${count} --ranks ${ranks} --batch-size ${batch} --seconds ${seconds} --rounds ${rounds}${touch:+ --touch}\`"
  echo "(${pipeline}; $(find "${dir}" -type f | wc -l) files; ranks $([[ ${#touch[@]} -gt 0 ]] && echo "read every byte of each batch" || echo "only receive batches"); CPU time lost to steal during the rounds: ${steal})"
  echo
  /usr/bin/python3 - "${runs}" "${ranks}" "$(nproc)" <<'PY'
import collections, statistics, sys

rate = collections.defaultdict(dict)  # run -> round -> images/s
pss = collections.defaultdict(list)
for line in open(sys.argv[1], encoding="utf-8"):
    round_, run, images_per_s, peak = line.split()
    rate[run][round_] = float(images_per_s)
    pss[run].append(int(peak))
ranks, procs = sys.argv[2], sys.argv[3]

def median_ratio(a, b):
    return statistics.median(rate[a][r] / rate[b][r] for r in rate[a])

rounds = sorted(rate["limit"], key=int)
print("| run | images/s, median (per round) | vs DataLoader | vs decode limit "
      "| peak PSS, median | vs DataLoader |")
print("|---|---|---|---|---|---|")
labels = {"limit": f"decode limit ({procs} processes, no loader)",
          "images": f"Ember images (emberd + {ranks} readers)",
          "images-packed": f"Ember images-packed (emberd + {ranks} readers)",
          "dataloader": f"DataLoader, {ranks} ranks x 2 workers"}
base_pss = statistics.median(pss["dataloader"])
for run in ("limit", "images", "images-packed", "dataloader"):
    per_round = ", ".join(f"{rate[run][r]:,.0f}" for r in rounds)
    memory = statistics.median(pss[run])
    print(f"| {labels[run]} | {statistics.median(rate[run].values()):,.0f} ({per_round}) "
          f"| {median_ratio(run, 'dataloader'):.1f}x | {100 * median_ratio(run, 'limit'):.0f}% "
          + (f"| {memory:,.0f} MiB | {100 * memory / base_pss:.0f}% |" if run != "limit" else "| | |"))
PY
  echo
  echo "Data wait of Ember readers with 50 ms steps: ${stall[sleep]} of their time (sleeping, a GPU step), ${stall[busy]} (busy CPU step competing with decoding)."
} | tee -a bench/results/images.md
