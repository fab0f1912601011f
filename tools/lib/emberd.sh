# shellcheck shell=bash
# A private emberd for scripts (sourced, not run): tools/demo, tools/check-cuda (and the
# `run` script of its --bundle, which carries this file), `bench/compare soak` (its
# emberd_leftovers). The daemon gets its socket and state directory as flags, no config
# file. Works with and without `set -e`; messages go to stderr.
#
#   emberd_start EMBERD EMBERCTL DIR [EMBERD_FLAGS...]
#       Starts EMBERD --socket DIR/emberd.sock --state-dir DIR/state [EMBERD_FLAGS...]
#       (e.g. --log-level warn) in the background, without systemd's NOTIFY_SOCKET, its
#       output in $emberd_log (set it before the call; default DIR/emberd.log). Returns 0
#       once `EMBERCTL --socket DIR/emberd.sock status` answers; 1, saying why and showing
#       the end of its log, if it exits first or does not answer within
#       $EMBERD_START_TIMEOUT seconds (default 30), after which it is stopped. Sets
#       emberd_pid and emberd_socket.
#   emberd_stop [TIMEOUT_S]
#       SIGTERM, then waits up to TIMEOUT_S (default 20) for it to exit, SIGKILL after.
#       Returns 0 if it exited with status 0, else 1 (saying why); 0 if none is running.
#   emberd_alive PID
#       True while PID is a live (not zombie) process.
#   emberd_shm_names
#       The names in /dev/shm, sorted: take them before a run, for emberd_leftovers.
#   emberd_run_pids DIR
#       Processes of a run in DIR: those naming DIR on their command line (emberd) and
#       those given its socket in their environment (EMBER_SOCKET, e.g. ember-run's ranks).
#   emberd_leftovers DIR SHM_BEFORE [PID...]
#       After emberd_stop: prints one line per thing the run left behind (the PIDs given,
#       if they still exist; emberd_run_pids DIR; names in /dev/shm that SHM_BEFORE did not
#       have; memfd rings, memfd:ember*, that those processes hold). Returns 1 if any.
#       Other runs on the machine (their daemons and ranks hold rings of their own) are
#       not looked at, except through /dev/shm.

emberd_pid=""
emberd_socket=""

emberd_alive() {
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "${state}" && "${state}" != "Z" ]]
}

emberd_start() {
  local emberd="$1" emberctl="$2" dir="$3"
  shift 3
  local log="${emberd_log:-${dir}/emberd.log}"
  emberd_socket="${dir}/emberd.sock"
  if ((${#emberd_socket} > 107)); then
    echo "emberd_start: socket path ${emberd_socket} is too long for a unix socket" >&2
    return 1
  fi
  env -u NOTIFY_SOCKET "${emberd}" --socket "${emberd_socket}" --state-dir "${dir}/state" "$@" \
    >"${log}" 2>&1 </dev/null &
  emberd_pid=$!
  local deadline=$((SECONDS + ${EMBERD_START_TIMEOUT:-30})) rc
  until "${emberctl}" --socket "${emberd_socket}" status >/dev/null 2>&1; do
    if ! emberd_alive "${emberd_pid}"; then
      wait "${emberd_pid}" && rc=0 || rc=$?
      echo "emberd_start: emberd exited with status ${rc} before serving; the end of ${log}:" >&2
      tail -n 20 "${log}" >&2
      emberd_pid=""
      return 1
    fi
    if ((SECONDS >= deadline)); then
      echo "emberd_start: emberd did not answer on ${emberd_socket} within ${EMBERD_START_TIMEOUT:-30} s; the end of ${log}:" >&2
      tail -n 20 "${log}" >&2
      emberd_stop 5 || true
      return 1
    fi
    sleep 0.1
  done
}

emberd_stop() {
  local timeout="${1:-20}" pid="${emberd_pid}" rc
  [[ -n "${pid}" ]] || return 0
  emberd_pid=""
  kill -TERM "${pid}" 2>/dev/null || true
  local deadline=$((SECONDS + timeout))
  while emberd_alive "${pid}" && ((SECONDS < deadline)); do sleep 0.1; done
  if emberd_alive "${pid}"; then
    kill -KILL "${pid}" 2>/dev/null || true
    wait "${pid}" 2>/dev/null || true
    echo "emberd_stop: emberd (pid ${pid}) was still running ${timeout} s after SIGTERM; killed" >&2
    return 1
  fi
  wait "${pid}" && rc=0 || rc=$?
  if ((rc != 0)); then
    echo "emberd_stop: emberd (pid ${pid}) exited with status ${rc} after SIGTERM (expected 0)" >&2
    return 1
  fi
}

emberd_shm_names() {
  find /dev/shm -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | LC_ALL=C sort || true
}

emberd_run_pids() {
  local dir="$1" environ pid
  [[ -n "${dir}" ]] || return 0
  pgrep -f -- "${dir}" | grep -vx "$$" || true
  for environ in /proc/[0-9]*/environ; do
    if tr '\0' '\n' 2>/dev/null <"${environ}" | grep -qxF "EMBER_SOCKET=${dir}/emberd.sock"; then
      pid="${environ#/proc/}"
      echo "${pid%/environ}"
    fi
  done
}

emberd_leftovers() {
  local dir="$1" shm_before="$2" pid target new_shm found=0
  shift 2
  local run_pids=("$@")
  for pid in "$@"; do
    if [[ -d "/proc/${pid}" ]]; then
      echo "started process ${pid} still exists"
      found=1
    fi
  done
  for pid in $(emberd_run_pids "${dir}" | sort -un); do
    echo "process ${pid} from this run remains: $(tr '\0' ' ' 2>/dev/null <"/proc/${pid}/cmdline")"
    run_pids+=("${pid}")
    found=1
  done
  new_shm="$(LC_ALL=C comm -13 <(echo "${shm_before}") <(emberd_shm_names) | sed '/^$/d')"
  if [[ -n "${new_shm}" ]]; then
    echo "new objects in /dev/shm: $(tr '\n' ' ' <<<"${new_shm}")"
    found=1
  fi
  for pid in "${run_pids[@]}"; do
    while read -r target; do
      echo "process ${pid} still holds ${target}: $(tr '\0' ' ' 2>/dev/null <"/proc/${pid}/cmdline")"
      found=1
    done < <(find "/proc/${pid}/fd" -maxdepth 1 -lname '*memfd:ember*' -printf '%l\n' 2>/dev/null || true)
  done
  return "${found}"
}
