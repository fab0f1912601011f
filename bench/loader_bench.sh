#!/usr/bin/env bash
# Loader throughput and memory, side by side in one run: `emberctl bench` (emberd + R
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

ranks=2
batch=64
seconds=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    *) echo "loader_bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

bazel build //daemon:emberd //sdk/emberctl:emberctl >/dev/null
tmp="$(mktemp -d /tmp/ember-bench.XXXXXX)"
daemon_pid=""
cleanup() {
  [[ -n "${daemon_pid}" ]] && kill "${daemon_pid}" 2>/dev/null && wait "${daemon_pid}" 2>/dev/null
  rm -rf "${tmp}"
}
trap cleanup EXIT

# All descendants of $1, and $1.
tree_pids() {
  local pid="$1" child
  echo "${pid}"
  for child in $(pgrep -P "${pid}" 2>/dev/null); do tree_pids "${child}"; done
}

pss_kib() {
  local total=0 pid v
  for pid in "$@"; do
    v="$(awk '/^Pss:/ {print $2}' "/proc/${pid}/smaps_rollup" 2>/dev/null || true)"
    total=$((total + ${v:-0}))
  done
  echo "${total}"
}

# Runs "$@" in the background and prints "<peak PSS MiB>" of its tree (plus $extra_pids)
# to fd 3 once it ends; its own output goes to stdout.
peak_pss_of() {
  "$@" &
  local root=$! peak=0 now
  while kill -0 "${root}" 2>/dev/null; do
    # shellcheck disable=SC2046
    now="$(pss_kib $(tree_pids "${root}") ${extra_pids:-})"
    ((now > peak)) && peak="${now}"
    sleep 0.5
  done
  wait "${root}"
  echo "$((peak / 1024))" >&3
}

cat >"${tmp}/emberd.yaml" <<CONF
socket: ${tmp}/emberd.sock
state_dir: ${tmp}/state
log_level: warn
CONF
bazel-bin/daemon/emberd --config "${tmp}/emberd.yaml" 2>"${tmp}/emberd.log" &
daemon_pid=$!
ctl=(bazel-bin/sdk/emberctl/emberctl --socket "${tmp}/emberd.sock")
for _ in $(seq 1 100); do "${ctl[@]}" status >/dev/null 2>&1 && break; sleep 0.1; done
"${ctl[@]}" dataset add fmnist-train --format idx --path /usr/share/datasets/fashion-mnist \
  --split train >/dev/null

echo "== Ember: emberctl bench (emberd + ${ranks} readers)"
extra_pids="${daemon_pid}"
ember_out="$(peak_pss_of "${ctl[@]}" bench fmnist-train --ranks "${ranks}" --batch-size "${batch}" \
  --seconds "${seconds}" 3>"${tmp}/ember.pss")"
echo "${ember_out}"
ember_rate="$(sed -n 's/^bench: samples_per_s=\([0-9.]*\).*/\1/p' <<<"${ember_out}")"
ember_pss="$(cat "${tmp}/ember.pss")"
kill "${daemon_pid}"; wait "${daemon_pid}" || true; daemon_pid=""
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

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }
mkdir -p bench/results
{
  echo
  echo "## $(date -u +%Y-%m-%dT%H:%MZ) — $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  echo
  echo "\`bench/loader_bench.sh --ranks ${ranks} --batch-size ${batch} --seconds ${seconds}\`"
  echo
  echo "| loader | samples/s | vs DataLoader w=2 | peak PSS, all processes | vs DataLoader w=2 |"
  echo "|---|---|---|---|---|"
  echo "| Ember (emberd + ${ranks} readers) | ${ember_rate} | $(ratio "${ember_rate}" "${base_rate[2]}")x | ${ember_pss} MiB | $(pct "${ember_pss}" "${base_pss[2]}") |"
  for w in 1 2; do
    echo "| DataLoader, ${ranks} ranks x ${w} workers | ${base_rate[$w]} | $(ratio "${base_rate[$w]}" "${base_rate[2]}")x | ${base_pss[$w]} MiB | $(pct "${base_pss[$w]}" "${base_pss[2]}") |"
  done
} | tee -a bench/results/loader_fmnist.md
