#!/usr/bin/env bash
# Loader throughput and memory, side by side in one run: bench/loader_bench (emberd + R
# reader processes) against the PyTorch DataLoader baseline (R rank processes with W
# workers each, for W in 1 2), same data (Fashion-MNIST train), ranks and batch size.
#
#   bench/loader_bench.sh [--ranks R] [--batch-size B] [--seconds S]
#
# Memory is PSS (proportional set size, /proc/PID/smaps_rollup) summed over every
# process of a run — for Ember the daemon plus the readers, for the baseline the ranks
# plus their workers — sampled every 0.5 s; the peak is reported. Results are appended
# to bench/results/loader_fmnist.md with the machine, date and command.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

ranks=2
batch=64
seconds=10
declare -A options=([--ranks]=ranks [--batch-size]=batch [--seconds]=seconds)
parse_options loader_bench "$@"

bazel build //daemon:emberd //tools/emberctl:emberctl //bench:loader_bench >/dev/null
make_bench_tmp

start_daemon "${tmp}"
"${ctl[@]}" dataset add fmnist-train --format idx --path /usr/share/datasets/fashion-mnist \
  --split train >/dev/null

echo "== Ember: loader_bench (emberd + ${ranks} readers)"
extra_pids="${daemon_pid}"
ember_out="$(peak_pss_of "${loader_bench[@]}" fmnist-train --ranks "${ranks}" --batch-size "${batch}" \
  --seconds "${seconds}" 3>"${tmp}/ember.pss")"
echo "${ember_out}"
ember_rate="$(sed -n 's/^bench: samples_per_s=\([0-9.]*\).*/\1/p' <<<"${ember_out}")"
ember_pss="$(cat "${tmp}/ember.pss")"
stop_daemon
extra_pids=""

declare -A base_rate base_pss
for workers in 1 2; do
  echo "== PyTorch DataLoader: ${ranks} ranks x ${workers} workers"
  out="$(peak_pss_of bench/dataloader_baseline.py --ranks "${ranks}" --batch-size "${batch}" \
    --workers "${workers}" --seconds "${seconds}" 3>"${tmp}/base.pss")"
  echo "${out}" | tail -n 1
  base_rate[${workers}]="$(sed -n 's/^baseline: samples_per_s=\([0-9.]*\).*/\1/p' <<<"${out}")"
  base_pss[${workers}]="$(cat "${tmp}/base.pss")"
done

mkdir -p bench/results
{
  results_heading "bench/loader_bench.sh --ranks ${ranks} --batch-size ${batch} --seconds ${seconds}"
  echo "| loader | samples/s | vs DataLoader w=2 | peak PSS, all processes | vs DataLoader w=2 |"
  echo "|---|---|---|---|---|"
  echo "| Ember (emberd + ${ranks} readers) | ${ember_rate} | $(ratio "${ember_rate}" "${base_rate[2]}")x | ${ember_pss} MiB | $(pct "${ember_pss}" "${base_pss[2]}") |"
  for w in 1 2; do
    echo "| DataLoader, ${ranks} ranks x ${w} workers | ${base_rate[$w]} | $(ratio "${base_rate[$w]}" "${base_rate[2]}")x | ${base_pss[$w]} MiB | $(pct "${base_pss[$w]}" "${base_pss[2]}") |"
  done
} | tee -a bench/results/loader_fmnist.md
