#!/usr/bin/env bash
# End-to-end training time against its compute floor, side by side in one run (issue 4):
#   - the example trainer (sdk/examples/fashion_mnist_train) on R ranks started by
#     ember-run, fed by a private emberd, gradients averaged through shared memory (its
#     default): its train_seconds (rank 0, first batch request to last optimizer step,
#     evaluation excluded);
#   - bench/compute_floor: the same model, optimizer, batch and number of steps (those one
#     rank of the trainer took) on Fashion-MNIST already in memory, in one single-threaded
#     process, no Ember, no sync;
#   - for context, R floors side by side (R processes at once, their mean time): what
#     keeping R cores busy costs this machine by itself, with no Ember and no sync.
# Target: trainer <= 1.15x floor (loading and sync together add at most 15%).
#
#   bench/train_bench.sh [--ranks R] [--epochs E] [--batch-size B] [--repeat N]
#
# Each repeat runs the trainer (gradients through shared memory, the trainer's default),
# then the floor with the trainer's step count. Results are appended to
# bench/results/train_e2e.md with the machine, date, command and the median ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

ranks=2
epochs=2
batch=64
repeat=1
declare -A options=([--ranks]=ranks [--epochs]=epochs [--batch-size]=batch [--repeat]=repeat)
parse_options train_bench "$@"
readonly data=/usr/share/datasets/fashion-mnist

bazel build //daemon:emberd //tools/emberctl:emberctl //tools/ember_run:ember-run \
  //sdk/examples:fashion_mnist_train //bench:compute_floor >/dev/null
make_bench_tmp

start_daemon "${tmp}"
"${ctl[@]}" dataset add fmnist-train --format idx --path "${data}" --split train >/dev/null
"${ctl[@]}" dataset add fmnist-test --format idx --path "${data}" --split test >/dev/null

rows=()
for run in $(seq 1 "${repeat}"); do
  echo "== run ${run}/${repeat}: trainer, ${ranks} ranks x ${epochs} epochs, batch ${batch}"
  bazel-bin/tools/ember_run/ember-run --nproc "${ranks}" --socket "${tmp}/emberd.sock" \
    --job "bench-${run}" -- \
    bazel-bin/sdk/examples/fashion_mnist_train --epochs "${epochs}" --batch-size "${batch}" \
    --seed "${run}" >"${tmp}/train.log" 2>&1
  cat "${tmp}/train.log"
  train_s="$(sed -n 's/^result: .*train_seconds=\([0-9.]*\).*/\1/p' "${tmp}/train.log")"
  steps="$(sed -n 's/^epoch .* steps=\([0-9]*\).*/\1/p' "${tmp}/train.log" | awk '{s += $1} END {print s}')"
  wait_s="$(sed -n 's/^epoch .* loader_wait_seconds=\([0-9.]*\).*/\1/p' "${tmp}/train.log" | awk '{s += $1} END {printf "%.2f", s}')"
  accuracy="$(sed -n 's/^result: test_accuracy=\([0-9.]*\).*/\1/p' "${tmp}/train.log")"
  [[ -n "${train_s}" && -n "${steps}" ]] || { echo "train_bench: no result from the trainer" >&2; exit 1; }

  echo "== run ${run}/${repeat}: compute floor, ${steps} steps"
  floor_out="$(bazel-bin/bench/compute_floor --data "${data}" --steps "${steps}" \
    --batch-size "${batch}" --seed "${run}")"
  echo "${floor_out}"
  floor_s="$(sed -n 's/^floor: .*seconds=\([0-9.]*\) .*/\1/p' <<<"${floor_out}")"

  echo "== run ${run}/${repeat}: ${ranks} compute floors side by side"
  pids=()
  for ((r = 0; r < ranks; ++r)); do
    bazel-bin/bench/compute_floor --data "${data}" --steps "${steps}" --batch-size "${batch}" \
      --seed "${run}" >"${tmp}/floor.${r}" &
    pids+=($!)
  done
  wait "${pids[@]}"
  cat "${tmp}"/floor.*
  side_s="$(sed -n 's/^floor: .*seconds=\([0-9.]*\) .*/\1/p' "${tmp}"/floor.* |
    awk '{s += $1} END {printf "%.2f", s / NR}')"
  rows+=("| ${run} | ${steps} | ${floor_s} | ${train_s} | $(awk -v a="${train_s}" -v b="${floor_s}" 'BEGIN { printf "%.2f", a / b }')x | ${side_s} ($(awk -v a="${side_s}" -v b="${floor_s}" 'BEGIN { printf "%.2f", a / b }')x) | ${wait_s} | ${accuracy} |")
done

mkdir -p bench/results
{
  results_heading "bench/train_bench.sh --ranks ${ranks} --epochs ${epochs} --batch-size ${batch} --repeat ${repeat}"
  echo "| run | steps per rank | floor s (1 process, 1 thread) | Ember trainer s (${ranks} ranks) | trainer / floor | ${ranks} floors side by side, mean s (/ floor) | rank 0 data wait s | test accuracy |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  if ((repeat > 1)); then
    echo
    echo "Median trainer / floor over the ${repeat} runs: $(printf '%s\n' "${rows[@]}" |
      awk -F'|' '{gsub(/[ x]/, "", $6); print $6}' | sort -n |
      awk '{v[NR] = $1} END {printf "%.2fx", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')"
  fi
} | tee -a bench/results/train_e2e.md
