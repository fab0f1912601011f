"""2 nodes x 1 rank against 1 node x 2 ranks, the same work (issue 12): tools/demo (the
example trainer on Fashion-MNIST, 2 epochs; --nodes 2 runs two emberd daemons as two nodes
on this machine, mutual TLS, node 0's coordinating), the layouts alternating each round.
Prints each run and the median training-time ratio (target <= 1.10x); both have global
batch 128, so their test accuracies should match. For 2 nodes it also records node 1's
coordination traffic per step (RPCs and bytes to the coordinator, from emberd's log at
stop). One JSON line per run to results/nodes.jsonl (results/nodes.md is written by hand).

  bench/compare nodes_bench [--rounds 2]
"""

import datetime
import json
import os
import re
import statistics
import subprocess

from scenarios import RunFailed, value

NAME = "nodes_bench"


def add_arguments(parser):
    parser.add_argument("--rounds", type=int, default=2)


def traffic_fields(line):
    """Node 1's per-step figures from its `coordinator ...: traffic: ...` line; with one rank
    on node 1, its leases are the job's steps."""
    def n(what):
        return int(re.search(r"(\d+) " + what, line).group(1))
    steps = n("leases received")
    calls = n("joinJob") + n("exchange") + n("openJob")
    return {"steps": steps, "coordination_calls": calls,
            "coordination_calls_per_step": round(calls / steps, 2),
            "coordination_bytes_sent_per_step": round(n("bytes sent") / steps),
            "coordination_bytes_received_per_step": round(n("bytes received") / steps)}


def main(ctx, args):
    ratios = []
    for round_ in range(1, args.rounds + 1):
        seconds = {}
        for nodes, per_node in ((1, 2), (2, 1)):
            done = subprocess.run(["./tools/demo", "--nodes", str(nodes), "--ranks-per-node",
                                   str(per_node)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  env={**os.environ, "TMPDIR": "/tmp"})
            last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
            if not last.startswith("demo: test_accuracy="):
                raise RunFailed(f"demo failed: {last}")
            accuracy, train = value(last, "test_accuracy"), value(last, "train_seconds")
            seconds[nodes] = train
            traffic = re.findall(r"demo: node 1: (coordinator .*)", done.stdout)
            fields = traffic_fields(traffic[-1]) if traffic else {}
            if traffic:
                print(f"round {round_}: node 1 to the coordinator: {traffic[-1]}")
            print(f"round {round_}: {nodes} node(s) x {per_node}: train_seconds={train} "
                  f"test_accuracy={accuracy}" + (f" traffic per step: {fields}" if fields else ""))
            record = {"bench": "nodes", "date": datetime.datetime.now(datetime.timezone.utc)
                      .strftime("%Y-%m-%dT%H:%M:%SZ"), "round": round_, "nodes": nodes,
                      "ranks_per_node": per_node, "train_seconds": train,
                      "test_accuracy": accuracy, **fields}
            ctx.append("nodes.jsonl", json.dumps(record, separators=(",", ":")) + "\n", show=False)
        ratios.append(seconds[2] / seconds[1])
        print(f"round {round_}: 2 nodes x 1 / 1 node x 2 = {ratios[-1]:.3f}x")
    print(f"nodes_bench: median training-time ratio 2 nodes x 1 / 1 node x 2 = "
          f"{statistics.median(ratios):.3f}x over {args.rounds} round(s) (target <= 1.10x)")
    return 0
