#!/usr/bin/env bash
# Issue 13's soak, by hand: one private emberd, `--jobs` jobs x `--ranks` reader
# processes kept running for `--seconds` with churn (jobs finish, are stopped with SIGTERM,
# or lose a rank to SIGKILL; new jobs take their place), emberd's RSS, Pss, fds, memfds
# and shm_bytes_in_use and /dev/shm sampled every `--sample-every` s, and every epoch of
# every completed job checked to hold each sample exactly once (bazel-bin/bench/soak_driver).
#
#   bench/soak.sh [--seconds 600] [--jobs 8] [--ranks 2] [--samples 4000] [--batch-size 32]
#                 [--min-epochs 2] [--max-epochs 5] [--step-ms 10] [--sample-every 10]
#                 [--seed 1]
#
# Appends the tables to bench/results/soak.md with the machine, date, command and load.
# After the daemon has stopped it also checks that the run left nothing behind (processes,
# /dev/shm names, memfds). Exit status 1 if a check failed; the ranks' logs of the jobs
# that failed, samples.tsv and emberd.log are then kept in a directory it names.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

seconds=600
jobs=8
ranks=2
samples=4000
batch=32
min_epochs=2
max_epochs=5
step_ms=10
sample_every=10
seed=1
declare -A options=([--seconds]=seconds [--jobs]=jobs [--ranks]=ranks [--samples]=samples
  [--batch-size]=batch [--min-epochs]=min_epochs [--max-epochs]=max_epochs [--step-ms]=step_ms
  [--sample-every]=sample_every [--seed]=seed)
parse_options soak "$@"

bazel build //daemon:emberd //tools/emberctl:emberctl //bench:soak_driver >/dev/null
make_bench_tmp
shm_before="$(emberd_shm_names)"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
start_daemon "${tmp}"

rc=0
bazel-bin/bench/soak_driver run --socket "${emberd_socket}" --dir "${tmp}" --seconds "${seconds}" \
  --jobs "${jobs}" --ranks "${ranks}" --samples "${samples}" --batch-size "${batch}" \
  --min-epochs "${min_epochs}" --max-epochs "${max_epochs}" --step-ms "${step_ms}" \
  --sample-every "${sample_every}" --seed "${seed}" --report "${tmp}/report.md" || rc=$?
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

stop_daemon || rc=1
leftovers="$(emberd_leftovers "${tmp}" "${shm_before}")" || rc=1
echo "${leftovers:-leftovers after emberd stopped: none}"

if ((rc != 0)); then
  kept="$(mktemp -d /tmp/ember-soak-failed.XXXXXX)"
  cp -r "${tmp}/logs" "${tmp}/samples.tsv" "${tmp}/emberd.log" "${kept}/" 2>/dev/null || true
  echo "soak: a check failed; the failed jobs' logs, samples.tsv and emberd.log are in ${kept}" >&2
fi

mkdir -p bench/results
{
  results_heading "bench/soak.sh $*"
  echo "Commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' || echo ' (with changes)'); load averages before ${load_before}, after ${load_after}."
  echo
  cat "${tmp}/report.md" 2>/dev/null || echo "(soak_driver wrote no report; exit status ${rc})"
  echo
  echo "After emberd stopped (SIGTERM, exit 0 expected): ${leftovers:-nothing left behind (processes, /dev/shm, memfds)}. Result: $( ((rc == 0)) && echo pass || echo FAIL)."
} >>bench/results/soak.md
tail -n 5 bench/results/soak.md
exit "${rc}"
