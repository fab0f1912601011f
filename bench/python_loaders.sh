#!/usr/bin/env bash
# torch's DataLoader against ember.Loader in one Python DDP training script (issue 14's
# benchmark): bench/python_ddp.py, 2 ranks under ember-run, identical but for the loader:
# DataLoader (DistributedSampler, persistent workers, pin_memory off) with 1, 2 and 4
# workers per rank, and ember.Loader fed by a private emberd (started afresh for each of
# its runs, so that its memory and its loading of the data count). Two tasks:
#   fmnist: the example CNN on Fashion-MNIST for --epochs epochs, then test accuracy;
#   jpeg:   a JPEG folder (bench/make_jpeg_folder.py, --count images) through
#           configs/pipelines/imagenet_train.yaml (torchvision's RandomResizedCrop(224) +
#           flip for the DataLoader) and a small CNN step, --steps steps per rank.
# Per run: wall time (the whole ember-run, startup included), the script's train time,
# images/s (jpeg: after 10 warm-up steps), test accuracy (fmnist) and the peak PSS summed
# over every process of the run (ember-run, ranks, workers; emberd for Ember). The four
# systems run interleaved, --rounds rounds, the 1-minute load average noted before each
# run. Appends every run to bench/results/python_loaders.jsonl and a table (medians over
# rounds; ratios: median of each round's ratio) to bench/results/python_loaders.md.
#
#   bench/python_loaders.sh [--rounds 2] [--tasks "fmnist jpeg"] [--epochs 2]
#                           [--count 2000] [--steps 150] [--jpeg-batch 32]
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=2
tasks="fmnist jpeg"
epochs=2
count=2000
steps=150
jpeg_batch=32
# shellcheck disable=SC2034  # read by parse_options
declare -A options=([--rounds]=rounds [--tasks]=tasks [--epochs]=epochs [--count]=count
  [--steps]=steps [--jpeg-batch]=jpeg_batch)
# shellcheck source=bench/lib.sh
source bench/lib.sh
parse_options python_loaders "$@"

bazel build //daemon:emberd //tools/emberctl:emberctl //tools/ember_run:ember-run \
  //sdk/python:ember >/dev/null
make_bench_tmp
mkdir -p "${tmp}/python/ember"
cp sdk/python/ember/*.py bazel-bin/sdk/python/ember/_ember.so "${tmp}/python/ember/"
export PYTHONPATH="${tmp}/python"
pipeline=configs/pipelines/imagenet_train.yaml
if [[ " ${tasks} " == *" jpeg "* ]]; then
  bench/make_jpeg_folder.py "${tmp}/jpegs" --count "${count}" >/dev/null
fi

# One line per run: round task system load wall_s peak_pss_mib <python_ddp's last line>.
runs="${tmp}/runs.txt"
: >"${runs}"
run=0
one_run() {  # round task system
  local round="$1" task="$2" system="$3" socket=() flags=() load start end out
  run=$((run + 1))
  if [[ "${task}" == fmnist ]]; then
    flags=(--task fmnist --epochs "${epochs}" --batch-size 64)
  else
    flags=(--task jpeg --steps "${steps}" --batch-size "${jpeg_batch}" --folder "${tmp}/jpegs"
      --dataset images)
  fi
  extra_pids=""
  if [[ "${system}" == ember ]]; then
    mkdir -p "${tmp}/d${run}"
    start_daemon "${tmp}/d${run}" || exit 1
    "${ctl[@]}" dataset add fmnist-train --format idx --path /usr/share/datasets/fashion-mnist \
      --split train >/dev/null
    "${ctl[@]}" dataset add fmnist-test --format idx --path /usr/share/datasets/fashion-mnist \
      --split test >/dev/null
    [[ "${task}" == fmnist ]] || "${ctl[@]}" dataset add images --format imagefolder \
      --path "${tmp}/jpegs" --pipeline "${pipeline}" >/dev/null
    socket=(--socket "${emberd_socket}")
    flags+=(--loader ember)
    extra_pids="${daemon_pid}"
  else
    flags+=(--loader dataloader --workers "${system#dataloader}")
  fi
  load="$(cut -d' ' -f1 /proc/loadavg)"
  echo "== round ${round}/${rounds}: ${task} ${system} (load ${load})"
  # Debian's torch 1.13 DataLoader now and then loses a worker to an abort at shutdown: one
  # retry (bench/image_bench.sh).
  for attempt in 1 2; do
    start="$(date +%s.%N)"
    out="$(peak_pss_of bazel-bin/tools/ember_run/ember-run --nproc 2 "${socket[@]}" -- \
      /usr/bin/python3 bench/python_ddp.py "${flags[@]}" --store "${tmp}/store${run}.${attempt}" \
      3>"${tmp}/pss" 2>&1)" || true
    end="$(date +%s.%N)"
    grep -q '^python_ddp: ' <<<"${out}" && break
    echo "python_loaders: the run failed (attempt ${attempt}):" >&2
    echo "${out}" | tail -n 8 >&2
    [[ "${attempt}" == 1 ]] || exit 1
  done
  [[ "${system}" != ember ]] || stop_daemon
  out="$(grep '^python_ddp: ' <<<"${out}" | tail -n 1)"
  echo "${out} peak_pss_mib=$(cat "${tmp}/pss")"
  echo "${round} ${task} ${system} ${load} $(awk -v a="${start}" -v b="${end}" \
    'BEGIN { printf "%.2f", b - a }') $(cat "${tmp}/pss") ${out}" >>"${runs}"
}

systems=(dataloader1 dataloader2 dataloader4 ember)
for task in ${tasks}; do
  for ((round = 1; round <= rounds; ++round)); do
    # Each round starts with another system, so that none always follows the same one.
    for ((k = 0; k < ${#systems[@]}; ++k)); do
      one_run "${round}" "${task}" "${systems[(k + round - 1) % ${#systems[@]}]}"
    done
  done
done

mkdir -p bench/results
{
  results_heading "bench/python_loaders.sh --rounds ${rounds} --tasks \"${tasks}\" --epochs ${epochs} --count ${count} --steps ${steps} --jpeg-batch ${jpeg_batch}"
  echo "(2 ranks under ember-run, torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), 1 torch thread per rank; 1-minute load before each run: $(awk '{print $4}' "${runs}" | paste -sd' '))"
  echo
  PYTHONPATH=bench /usr/bin/python3 - "${runs}" bench/results/python_loaders.jsonl <<'PY'
import collections, statistics, sys
import json_lines

runs = collections.defaultdict(dict)  # (task, system) -> round -> fields
for line in open(sys.argv[1], encoding="utf-8"):
    round_, task, system, load, wall, pss, _, *fields = line.split()
    values = dict(f.split("=", 1) for f in fields)
    record = {"round": int(round_), "task": task, "system": system, "wall_seconds": float(wall),
              "peak_pss_mib": int(pss), **{k: float(values[k]) for k in
              ("train_seconds", "images_per_s", "test_accuracy")}, "steps": int(values["steps"]),
              "batch": int(values["batch"]), "ranks": int(values["ranks"])}
    json_lines.append(sys.argv[2], "python_loaders", float(load), record)
    runs[task, system][int(round_)] = record

def median(task, system, key):
    return statistics.median(r[key] for r in runs[task, system].values())

def ratio(task, system, base, key):  # median over the rounds of both of the round's ratio
    return statistics.median(runs[task, system][r][key] / runs[task, base][r][key]
                             for r in runs[task, system] if r in runs[task, base])

names = {"dataloader1": "DataLoader, 1 worker/rank", "dataloader2": "DataLoader, 2 workers/rank",
         "dataloader4": "DataLoader, 4 workers/rank", "ember": "ember.Loader (+ emberd)"}
for task in sorted({t for t, _ in runs}):
    dls = [s for s in ("dataloader1", "dataloader2", "dataloader4") if (task, s) in runs]
    best = min(dls, key=lambda s: median(task, s, "wall_seconds"))
    quality = "test accuracy" if task == "fmnist" else "images/s"
    qkey = "test_accuracy" if task == "fmnist" else "images_per_s"
    print(f"**{task}** (best DataLoader by wall time: {names[best]})\n")
    print(f"| loader | wall s, median (per round) | train s | {quality} | peak PSS MiB, median "
          f"| Ember time / this | Ember PSS / this |")
    print("|---|---|---|---|---|---|---|")
    for system in dls + ["ember"]:
        per_round = ", ".join(f"{r['wall_seconds']:.1f}" for _, r in sorted(runs[task, system].items()))
        q = median(task, system, qkey)
        qtext = f"{q:.4f}" if task == "fmnist" else f"{q:,.0f}"
        versus = ("| | |" if system == "ember" else
                  f"| {ratio(task, 'ember', system, 'wall_seconds'):.2f}x "
                  f"| {ratio(task, 'ember', system, 'peak_pss_mib'):.2f}x |")
        print(f"| {names[system]} | {median(task, system, 'wall_seconds'):.1f} ({per_round}) "
              f"| {median(task, system, 'train_seconds'):.1f} | {qtext} "
              f"| {median(task, system, 'peak_pss_mib'):,.0f} {versus}")
    print()
PY
} | tee -a bench/results/python_loaders.md
