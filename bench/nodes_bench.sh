#!/usr/bin/env bash
# 2 nodes x 1 rank against 1 node x 2 ranks, the same work (issue 12): the example trainer
# on Fashion-MNIST for 2 epochs through tools/demo, whose `--nodes 2` runs two emberd
# daemons as two nodes on this machine (own sockets, ports, state dirs, mutual TLS; node
# 0's daemon coordinates, node 1's proxies its rank's leases and the rendezvous to it).
# Rounds alternate the two layouts (this machine's speed drifts); prints each run and the
# median of the training-time ratios (target <= 1.10x), and appends one JSON line per run
# to bench/results/nodes.jsonl. Both layouts have the same global batch (128), so the same
# samples in the same steps: their test accuracies should match.
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
    line="$(TMPDIR=/tmp ./tools/demo --nodes "${nodes}" --ranks-per-node "${per_node}" 2>&1 | tail -n 1)"
    [[ "${line}" == demo:\ test_accuracy=* ]] || { echo "nodes_bench: demo failed: ${line}" >&2; exit 1; }
    accuracy="$(sed -E 's/.*test_accuracy=([^ ]+).*/\1/' <<<"${line}")"
    train="$(sed -E 's/.*train_seconds=([^ ]+).*/\1/' <<<"${line}")"
    seconds["${nodes}"]="${train}"
    echo "round ${round}: ${nodes} node(s) x ${per_node}: train_seconds=${train} test_accuracy=${accuracy}"
    printf '{"bench":"nodes","date":"%s","round":%d,"nodes":%d,"ranks_per_node":%d,"train_seconds":%s,"test_accuracy":%s}\n' \
      "$(date -u +%FT%TZ)" "${round}" "${nodes}" "${per_node}" "${train}" "${accuracy}" >>"${out}"
  done
  ratios+=("$(awk -v a="${seconds[2]}" -v b="${seconds[1]}" 'BEGIN { printf "%.3f", a / b }')")
  echo "round ${round}: 2 nodes x 1 / 1 node x 2 = ${ratios[-1]}x"
done
median="$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
echo "nodes_bench: median training-time ratio 2 nodes x 1 / 1 node x 2 = ${median}x over ${rounds} round(s) (target <= 1.10x)"
