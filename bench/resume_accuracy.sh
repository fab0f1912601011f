#!/usr/bin/env bash
# Resuming from a mid-epoch checkpoint on another world size against an uninterrupted run
# (issue 12), on Fashion-MNIST with the example trainer (sdk/examples/fashion_mnist_train):
#   - uninterrupted: 2 ranks x B for E epochs;
#   - interrupted: 2 ranks x B stopped after S global steps (--stop-after-steps, mid-epoch,
#     after its checkpoint), then resumed from that checkpoint with 1 rank x B' (default 2B:
#     the same global batch, so the same steps) to the end.
# Both runs write --sample-log; for each, the union of its ranks' logs must hold every
# sample exactly once per epoch. Prints both test accuracies, their difference (target:
# within 0.5 points) and the exactly-once checks, and appends one JSON line to
# bench/results/resume_accuracy.jsonl. Exits 1 if a check fails or the difference is over
# the target.
#
#   bench/resume_accuracy.sh [--epochs 2] [--batch-size 64] [--stop-after 235]
#                            [--resume-batch-size 128] [--seed 0]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

epochs=2
batch=64
stop_after=235  # of 469 global steps per epoch at 2 x 64: the middle of epoch 0
resume_batch=""
seed=0
declare -A options=([--epochs]=epochs [--batch-size]=batch [--stop-after]=stop_after
  [--resume-batch-size]=resume_batch [--seed]=seed)
parse_options resume_accuracy "$@"
resume_batch="${resume_batch:-$((2 * batch))}"
readonly data=/usr/share/datasets/fashion-mnist
readonly samples=60000  # Fashion-MNIST's train split
readonly max_diff_points=0.5
command_line="bench/resume_accuracy.sh --epochs ${epochs} --batch-size ${batch}"
command_line+=" --stop-after ${stop_after} --resume-batch-size ${resume_batch} --seed ${seed}"

bazel build //daemon:emberd //tools/emberctl:emberctl //tools/ember_run:ember-run \
  //sdk/examples:fashion_mnist_train >/dev/null
make_bench_tmp
load_before="$(awk '{print $1}' /proc/loadavg)"

start_daemon "${tmp}"
"${ctl[@]}" dataset add fmnist-train --format idx --path "${data}" --split train >/dev/null
"${ctl[@]}" dataset add fmnist-test --format idx --path "${data}" --split test >/dev/null

# train LOG RANKS BATCH [TRAINER_FLAGS...]: runs the trainer, its output to LOG and stdout.
train() {
  local log="$1" ranks="$2" batch_size="$3"
  shift 3
  bazel-bin/tools/ember_run/ember-run --nproc "${ranks}" --socket "${tmp}/emberd.sock" -- \
    bazel-bin/sdk/examples/fashion_mnist_train --epochs "${epochs}" --batch-size "${batch_size}" \
    --seed "${seed}" "$@" >"${log}" 2>&1 || { cat "${log}"; echo "resume_accuracy: the trainer failed" >&2; exit 1; }
  cat "${log}"
}
accuracy_of() { sed -n 's/^result: test_accuracy=\([0-9.]*\).*/\1/p' "$1"; }
seconds_of() { sed -n 's/^result: .*train_seconds=\([0-9.]*\).*/\1/p' "$1"; }

# exactly_once DIR: "true" if the logs in DIR hold each of the samples once per epoch,
# else "false"; the counts on stderr.
exactly_once() {
  awk -v epochs="${epochs}" -v samples="${samples}" '
    { key = $1 " " $4; if (++seen[key] == 2) repeated++; if ($4 >= samples) bad++ }
    END {
      distinct = 0; for (k in seen) distinct++
      printf "  %d distinct (epoch, sample) pairs of %d, %d repeated, %d out of range\n",
        distinct, epochs * samples, repeated, bad > "/dev/stderr"
      print (distinct == epochs * samples && repeated == 0 && bad == 0) ? "true" : "false"
    }' "$1"/rank-*.log
}

echo "== uninterrupted: 2 ranks x ${batch}, ${epochs} epochs"
train "${tmp}/full.log" 2 "${batch}" --sample-log "${tmp}/full-samples"
full_accuracy="$(accuracy_of "${tmp}/full.log")"
full_seconds="$(seconds_of "${tmp}/full.log")"

echo "== interrupted: 2 ranks x ${batch}, stopped after ${stop_after} steps"
train "${tmp}/first.log" 2 "${batch}" --sample-log "${tmp}/resumed-samples" \
  --checkpoint "${tmp}/ckpt" --stop-after-steps "${stop_after}"
echo "== resumed: 1 rank x ${resume_batch}"
train "${tmp}/second.log" 1 "${resume_batch}" --sample-log "${tmp}/resumed-samples" \
  --checkpoint "${tmp}/ckpt"
resumed_accuracy="$(accuracy_of "${tmp}/second.log")"
resumed_from="$(sed -n 's/^resumed: from [^ ]* \(at epoch [0-9]* step [0-9]*\).*/\1/p' "${tmp}/second.log")"
[[ -n "${full_accuracy}" && -n "${resumed_accuracy}" && -n "${resumed_from}" ]] ||
  { echo "resume_accuracy: no result or resume line from the trainer" >&2; exit 1; }

echo "== exactly once per epoch"
echo " uninterrupted:"
full_once="$(exactly_once "${tmp}/full-samples")"
echo " interrupted and resumed:"
resumed_once="$(exactly_once "${tmp}/resumed-samples")"
diff_points="$(awk -v a="${full_accuracy}" -v b="${resumed_accuracy}" 'BEGIN { d = 100 * (b - a); printf "%.2f", d }')"
within="$(awk -v d="${diff_points}" -v m="${max_diff_points}" 'BEGIN { print (d <= m && -d <= m) ? "true" : "false" }')"

echo "resume_accuracy: uninterrupted test_accuracy=${full_accuracy} (2 x ${batch})" \
  "resumed test_accuracy=${resumed_accuracy} (2 x ${batch}, ${resumed_from}, then 1 x ${resume_batch})" \
  "difference=${diff_points} points (within ${max_diff_points}: ${within})" \
  "exactly_once: uninterrupted=${full_once} resumed=${resumed_once}"

mkdir -p bench/results
printf '{"tool": "resume_accuracy", "time": "%s", "host": "%s", "cpus": %d, "loadavg_1min_before": %s, "command": "%s", "dataset": "fmnist-train", "epochs": %d, "batch": %d, "stop_after_steps": %d, "resume_ranks": 1, "resume_batch": %d, "resumed_from": "%s", "uninterrupted_accuracy": %s, "uninterrupted_train_seconds": %s, "resumed_accuracy": %s, "difference_points": %s, "within_target": %s, "exactly_once_uninterrupted": %s, "exactly_once_resumed": %s}\n' \
  "$(date +%Y-%m-%dT%H:%M:%S%z)" "$(hostname)" "$(nproc)" "${load_before}" "${command_line}" \
  "${epochs}" "${batch}" "${stop_after}" "${resume_batch}" "${resumed_from}" "${full_accuracy}" \
  "${full_seconds}" "${resumed_accuracy}" "${diff_points}" "${within}" "${full_once}" \
  "${resumed_once}" >>bench/results/resume_accuracy.jsonl
[[ "${full_once}" == true && "${resumed_once}" == true && "${within}" == true ]]
