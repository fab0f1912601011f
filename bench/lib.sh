# shellcheck shell=bash
# Shared by the bench/*.sh scripts (sourced, not run, from the repository root): their
# options, a private emberd (tools/lib/emberd.sh), peak PSS of a run summed over all its
# processes, and the heading of their results.

# shellcheck source=tools/lib/emberd.sh
source tools/lib/emberd.sh

# Parses "--option value" pairs: $1 names the script in messages, the associative array
# `options` maps each option to the variable it sets, and the rest are the arguments. An
# option not in `options`, or one without its value: "<script>: unknown argument '...'"
# on stderr and exit 2.
parse_options() {
  local script="$1"
  shift
  while [[ $# -gt 0 ]]; do
    if [[ -z "${options[$1]:-}" || $# -lt 2 ]]; then
      echo "${script}: unknown argument '$1'" >&2
      exit 2
    fi
    printf -v "${options[$1]}" '%s' "$2"
    shift 2
  done
}

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

# Starts the built emberd on a socket in $1 (a directory), logging warnings and errors to
# $1/emberd.log; sets daemon_pid, ctl (emberctl argv) and loader_bench (bench/loader_bench
# argv), both on its socket.
# shellcheck disable=SC2034  # the outputs, used by the scripts that source this file
start_daemon() {
  emberd_start bazel-bin/daemon/emberd bazel-bin/tools/emberctl/emberctl "$1" --log-level warn ||
    return 1
  daemon_pid="${emberd_pid}"
  ctl=(bazel-bin/tools/emberctl/emberctl --socket "${emberd_socket}")
  loader_bench=(bazel-bin/bench/loader_bench --socket "${emberd_socket}")
}

stop_daemon() {
  emberd_stop || true
  # shellcheck disable=SC2034
  daemon_pid=""
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }
machine() { echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"; }

# The start of a run's entry in a bench/results/*.md file: a heading with the UTC time and
# the machine, and the command line $1.
results_heading() {
  echo
  echo "## $(date -u +%Y-%m-%dT%H:%MZ) — $(machine)"
  echo
  echo "\`$1\`"
  echo
}
