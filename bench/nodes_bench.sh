#!/usr/bin/env bash
# 2 nodes x 1 rank against 1 node x 2 ranks, the same work (issue 12): the example trainer
# on Fashion-MNIST for 2 epochs through tools/demo, whose `--nodes 2` runs two emberd
# daemons as two nodes on this machine (own sockets, ports, state dirs, mutual TLS; node
# 0's daemon coordinates, node 1's proxies its rank's leases and the rendezvous to it).
# Rounds alternate the two layouts (this machine's speed drifts); prints each run and the
# median of the training-time ratios (target <= 1.10x), and appends one JSON line per run
# to bench/results/nodes.jsonl. Both layouts have the same global batch (128), so the same
# samples in the same steps: their test accuracies should match. For 2 nodes it also
# records node 1's coordination traffic per step (RPCs and bytes to the coordinator).
#
#   bench/nodes_bench.sh [--rounds 2]
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "nodes_bench: unknown argument '$1' (usage: bench/nodes_bench.sh [--rounds N])" >&2; exit 2 ;;
  esac
done
mkdir -p bench/results
readonly out=bench/results/nodes.jsonl
ratios=()
for ((round = 1; round <= rounds; ++round)); do
  declare -A seconds=()
  for layout in "1 2" "2 1"; do
    read -r nodes per_node <<<"${layout}"
    output="$(TMPDIR=/tmp ./tools/demo --nodes "${nodes}" --ranks-per-node "${per_node}" 2>&1)"
    line="$(tail -n 1 <<<"${output}")"
    [[ "${line}" == demo:\ test_accuracy=* ]] || { echo "nodes_bench: demo failed: ${line}" >&2; exit 1; }
    accuracy="$(sed -E 's/.*test_accuracy=([^ ]+).*/\1/' <<<"${line}")"
    train="$(sed -E 's/.*train_seconds=([^ ]+).*/\1/' <<<"${line}")"
    seconds["${nodes}"]="${train}"
    # Node 1's coordination traffic (emberd logs it on stop; the demo passes it on). With
    # one rank on node 1, its leases are the job's steps.
    traffic_fields=""
    traffic="$(grep -oE 'demo: node 1: coordinator .*' <<<"${output}" | tail -n 1 || true)"
    if [[ -n "${traffic}" ]]; then
      traffic_fields="$(/usr/bin/python3 - "${traffic}" <<'PY'
import re, sys
t = sys.argv[1]
n = lambda what: int(re.search(r"(\d+) " + what, t).group(1))
steps = n("leases received")
calls = n("joinJob") + n("exchange") + n("openJob")
sent, received = n("bytes sent") / steps, n("bytes received") / steps
print(f',"steps":{steps},"coordination_calls":{calls},"coordination_calls_per_step":{calls / steps:.2f},'
      f'"coordination_bytes_sent_per_step":{sent:.0f},"coordination_bytes_received_per_step":{received:.0f}')
PY
)"
      echo "round ${round}: node 1 to the coordinator: ${traffic#demo: node 1: }"
    fi
    echo "round ${round}: ${nodes} node(s) x ${per_node}: train_seconds=${train} test_accuracy=${accuracy}${traffic_fields:+ traffic per step: ${traffic_fields}}"
    printf '{"bench":"nodes","date":"%s","round":%d,"nodes":%d,"ranks_per_node":%d,"train_seconds":%s,"test_accuracy":%s%s}\n' \
      "$(date -u +%FT%TZ)" "${round}" "${nodes}" "${per_node}" "${train}" "${accuracy}" "${traffic_fields}" >>"${out}"
  done
  ratios+=("$(awk -v a="${seconds[2]}" -v b="${seconds[1]}" 'BEGIN { printf "%.3f", a / b }')")
  echo "round ${round}: 2 nodes x 1 / 1 node x 2 = ${ratios[-1]}x"
done
median="$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
echo "nodes_bench: median training-time ratio 2 nodes x 1 / 1 node x 2 = ${median}x over ${rounds} round(s) (target <= 1.10x)"
