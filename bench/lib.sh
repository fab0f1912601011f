# Shared by the bench/*.sh scripts (sourced, not run): a private emberd, and peak PSS of
# a run summed over all its processes.

# All descendants of $1, and $1.
tree_pids() {
  local pid="$1" child
  echo "${pid}"
  for child in $(pgrep -P "${pid}" 2>/dev/null); do tree_pids "${child}"; done
}

# Sum of Pss (KiB) over the given pids.
pss_kib() {
  local total=0 pid v
  for pid in "$@"; do
    v="$(awk '/^Pss:/ {print $2}' "/proc/${pid}/smaps_rollup" 2>/dev/null || true)"
    total=$((total + ${v:-0}))
  done
  echo "${total}"
}

# Runs "$@", sampling every 0.5 s the PSS of its process tree plus ${extra_pids}; its
# output goes to stdout, the peak (MiB) to fd 3.
peak_pss_of() {
  "$@" &
  local root=$! peak=0 now
  while kill -0 "${root}" 2>/dev/null; do
    # shellcheck disable=SC2046,SC2086
    now="$(pss_kib $(tree_pids "${root}") ${extra_pids:-})"
    ((now > peak)) && peak="${now}"
    sleep 0.5
  done
  wait "${root}"
  echo "$((peak / 1024))" >&3
}

# Sets tmp to a fresh directory, removed (after stopping the daemon, if any) when the
# script exits.
make_bench_tmp() {
  tmp="$(mktemp -d /tmp/ember-bench.XXXXXX)"
  trap 'stop_daemon; rm -rf "${tmp}"' EXIT
}

# Starts emberd on a socket in $1 (a directory); sets daemon_pid and ctl (emberctl argv).
start_daemon() {
  local dir="$1"
  cat >"${dir}/emberd.yaml" <<CONF
socket: ${dir}/emberd.sock
state_dir: ${dir}/state
log_level: warn
CONF
  bazel-bin/daemon/emberd --config "${dir}/emberd.yaml" 2>"${dir}/emberd.log" &
  daemon_pid=$!
  ctl=(bazel-bin/tools/emberctl/emberctl --socket "${dir}/emberd.sock")
  for _ in $(seq 1 100); do "${ctl[@]}" status >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "bench: emberd did not start; its log:" >&2
  cat "${dir}/emberd.log" >&2
  return 1
}

stop_daemon() {
  if [[ -n "${daemon_pid:-}" ]]; then
    kill "${daemon_pid}" 2>/dev/null || true
    wait "${daemon_pid}" 2>/dev/null || true
    daemon_pid=""
  fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }
machine() { echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"; }
