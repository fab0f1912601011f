#!/usr/bin/env bash
# Coordinator scale, simulated (issue 12): bench/coordinator_scale against a private emberd
# (it starts its own, `listen: 127.0.0.1:0`, `tls: off`) for each node count, 8 ranks per
# node, at 10 global steps/s, each node count with each --protocols in turn (per-node: one
# Peer.exchange per node per step, as emberd's proxy does; per-rank: a commit and a next
# RPC per rank, the protocol-1 proxy, for comparison). Appends every run's JSON line to
# bench/results/coordinator_scale.jsonl and a table to bench/results/coordinator_scale.md,
# with the load before each run and the busiest other processes (on a small machine the
# simulated nodes and other work share the cores with the coordinator). --peer-threads: the
# emberd's peer_threads, each value in turn (0: its default); --repeat: rounds of the
# whole interleaved set; --clients: how the simulated nodes speak (light: bench/peer_wire_client,
# the RPC protocol written directly; rpc: a Cap'n Proto RpcSystem each, as a real daemon).
#
#   bench/coordinator_scale.sh [--nodes "64 256 1024"] [--ranks-per-node 8]
#                              [--steps-per-second 10] [--seconds 15] [--warmup 2]
#                              [--batch 32] [--spread 0] [--threads 1]
#                              [--protocols "per-node per-rank"] [--peer-threads "0"]
#                              [--clients "light"] [--repeat 1]
set -euo pipefail
cd "$(dirname "$0")/.."

nodes="64 256 1024"
ranks_per_node=8
steps_per_second=10
seconds=15
warmup=2
batch=32
spread=0
threads=1
protocols="per-node per-rank"
peer_threads="0"
clients="light"
repeat=1
# shellcheck disable=SC2034  # read by parse_options
declare -A options=([--nodes]=nodes [--ranks-per-node]=ranks_per_node
  [--steps-per-second]=steps_per_second [--seconds]=seconds [--warmup]=warmup
  [--batch]=batch [--spread]=spread [--threads]=threads [--protocols]=protocols
  [--peer-threads]=peer_threads [--clients]=clients [--repeat]=repeat)
# shellcheck source=bench/lib.sh
source bench/lib.sh
parse_options coordinator_scale "$@"
command_line="bench/coordinator_scale.sh --nodes \"${nodes}\" --ranks-per-node ${ranks_per_node}"
command_line+=" --steps-per-second ${steps_per_second} --seconds ${seconds} --warmup ${warmup}"
command_line+=" --batch ${batch} --spread ${spread} --threads ${threads} --protocols \"${protocols}\""
command_line+=" --peer-threads \"${peer_threads}\" --clients \"${clients}\" --repeat ${repeat}"

bazel build //bench:coordinator_scale >/dev/null
runs="$(mktemp /tmp/coordinator_scale.XXXXXX.jsonl)"
others="$(mktemp /tmp/coordinator_scale.XXXXXX.txt)"
trap 'rm -f "${runs}" "${others}"' EXIT
for round in $(seq 1 "${repeat}"); do
  for n in ${nodes}; do
    for protocol in ${protocols}; do
      case "${protocol}" in
        per-node) per_rank=() ;;
        per-rank) per_rank=(--per-rank) ;;
        *) echo "coordinator_scale.sh: --protocols: '${protocol}' is not per-node or per-rank" >&2; exit 2 ;;
      esac
      for pt in ${peer_threads}; do
        for client in ${clients}; do
          case "${client}" in
            light) client_flag=() ;;
            rpc) client_flag=(--rpc-client) ;;
            *) echo "coordinator_scale.sh: --clients: '${client}' is not light or rpc" >&2; exit 2 ;;
          esac
          # The per-rank protocol has only the RPC client.
          [[ "${protocol}" == per-rank && "${client}" == light ]] && client_flag=()
          # What else runs: the five busiest processes over the last second.
          busy="$(top -b -n 2 -d 1 -w 200 | awk '/^top -/ {block++} block == 2 && $1 ~ /^[0-9]+$/ && $9 + 0 >= 5 {print $12 " " $9 "%"}' | head -5 | paste -sd ',' - | sed 's/,/, /g')"
          echo "round ${round}, ${n} nodes, ${protocol}, peer_threads ${pt}, ${client} client: ${busy:-none above 5% of a core}" >>"${others}"
          bazel-bin/bench/coordinator_scale --nodes "${n}" --ranks-per-node "${ranks_per_node}" \
            --steps-per-second "${steps_per_second}" --seconds "${seconds}" --warmup "${warmup}" \
            --batch "${batch}" --spread "${spread}" --threads "${threads}" --peer-threads "${pt}" \
            "${per_rank[@]}" "${client_flag[@]}" --json "${runs}"
        done
      done
    done
  done
done
cat "${runs}" >>bench/results/coordinator_scale.jsonl
{
  results_heading "${command_line}"
  echo "Commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- daemon schemas || echo ' (daemon/ or schemas/ modified)')."
  echo
  /usr/bin/python3 - "${runs}" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print("| nodes x ranks | protocol | client | peer threads | steps/s (target) | late ticks | coordinator CPU ms/step | µs/rank-step "
      "| cores (busiest thread) | cores at target | lease p50 / p99 / max ms | journal B/step "
      "| RPCs/step | client tx / rx KiB/step | client cores | load before |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['nodes']} x {r['ranks_per_node']} | {r.get('protocol', 'per-rank')} "
          f"| {r.get('client', 'rpc')} | {r.get('coordinator_peer_loops', 0)} | {r['steps_per_second']:.2f} ({r['target_steps_per_second']:g}) "
          f"| {r['late_rank_ticks']} | {r['coordinator_cpu_ms_per_step']:.1f} "
          f"| {r['coordinator_cpu_us_per_rank_step']:.0f} "
          f"| {r['coordinator_cores']:.2f} ({r['busiest_thread_cores']:.2f}) "
          f"| {r['coordinator_cores_at_target']:.2f} "
          f"| {r['lease_p50_ms']:.1f} / {r['lease_p99_ms']:.1f} / {r['lease_max_ms']:.1f} "
          f"| {r['journal_bytes_per_step']:.0f} ({r['journal_compactions']} compactions) "
          f"| {r['rpcs_per_step']:.0f} "
          f"| {r['client_tx_bytes_per_step'] / 1024:.0f} / {r['client_rx_bytes_per_step'] / 1024:.0f} "
          f"| {r['client_cores']:.2f} | {r['loadavg_1min_before']} |")
print()
print("Start-up per run: " + "; ".join(
    f"{r['nodes']} nodes ({r.get('protocol', 'per-rank')}): connect + join {r['connect_s']:.1f} s, first step {r['first_step_s']:.2f} s "
    f"({r['num_samples']} samples, {r['steps_per_epoch']} steps/epoch), "
    f"coordinator peak RSS {r['coordinator_peak_rss_mib']:.0f} MiB, {r['coordinator_fds']} fds"
    for r in rows) + ".")
PY
  echo
  echo "Busiest other processes before each run (top, % of one core):"
  echo
  sed 's/^/- /' "${others}"
} >>bench/results/coordinator_scale.md
echo "coordinator_scale: appended to bench/results/coordinator_scale.md and .jsonl"
