"""Coordinator scale, simulated (issue 12): bazel-bin/bench/coordinator_scale (it starts
its own emberd, `listen: 127.0.0.1:0`, `tls: off`) for each node count, protocol
(per-node: one Peer.exchange per node per step, as emberd's proxy; per-rank: a commit and a
next per rank, the protocol-1 proxy), --peer-threads value (the emberd's peer_threads, 0:
its default) and client kind (light: bench/peer_wire_client; rpc: an RpcSystem each),
interleaved, --repeat rounds. Appends every run's JSON line to
results/coordinator_scale.jsonl and a table to results/coordinator_scale.md, with the load
before each run and the busiest other processes.

  bench/compare coordinator_scale [--nodes "64 256 1024"] [--ranks-per-node 8]
      [--steps-per-second 10] [--seconds 15] [--warmup 2] [--batch 32] [--spread 0]
      [--threads 1] [--protocols "per-node per-rank"] [--peer-threads "0"]
      [--clients "light"] [--repeat 1]
"""

import json
import os
import subprocess

from scenarios import RunFailed, commit, heading

NAME = "coordinator_scale"


def add_arguments(parser):
    parser.add_argument("--nodes", default="64 256 1024", help="node counts, space-separated")
    parser.add_argument("--ranks-per-node", default="8")
    parser.add_argument("--steps-per-second", default="10")
    parser.add_argument("--seconds", default="15")
    parser.add_argument("--warmup", default="2")
    parser.add_argument("--batch", default="32")
    parser.add_argument("--spread", default="0")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--protocols", default="per-node per-rank")
    parser.add_argument("--peer-threads", default="0")
    parser.add_argument("--clients", default="light")
    parser.add_argument("--repeat", type=int, default=1)


def busiest():
    """The five busiest processes over the last second (top, % of one core, at least 5%)."""
    done = subprocess.run(["top", "-b", "-n", "2", "-d", "1", "-w", "200"], capture_output=True,
                          text=True)
    block, found = 0, []
    for line in done.stdout.splitlines():
        if line.startswith("top -"):
            block += 1
        fields = line.split()
        if block == 2 and len(fields) >= 12 and fields[0].isdigit():
            if float(fields[8].replace(",", ".")) >= 5:
                found.append(f"{fields[11]} {fields[8]}%")
    return ", ".join(found[:5]) or "none above 5% of a core"


def table(rows):
    out = ["| nodes x ranks | protocol | client | peer threads | steps/s (target) | late ticks "
           "| coordinator CPU ms/step | µs/rank-step | cores (busiest thread) | cores at target "
           "| lease p50 / p99 / max ms | journal B/step | RPCs/step | client tx / rx KiB/step "
           "| client cores | load before |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| {r['nodes']} x {r['ranks_per_node']} | {r.get('protocol', 'per-rank')} "
            f"| {r.get('client', 'rpc')} | {r.get('coordinator_peer_loops', 0)} "
            f"| {r['steps_per_second']:.2f} ({r['target_steps_per_second']:g}) "
            f"| {r['late_rank_ticks']} | {r['coordinator_cpu_ms_per_step']:.1f} "
            f"| {r['coordinator_cpu_us_per_rank_step']:.0f} "
            f"| {r['coordinator_cores']:.2f} ({r['busiest_thread_cores']:.2f}) "
            f"| {r['coordinator_cores_at_target']:.2f} "
            f"| {r['lease_p50_ms']:.1f} / {r['lease_p99_ms']:.1f} / {r['lease_max_ms']:.1f} "
            f"| {r['journal_bytes_per_step']:.0f} ({r['journal_compactions']} compactions) "
            f"| {r['rpcs_per_step']:.0f} "
            f"| {r['client_tx_bytes_per_step'] / 1024:.0f} / "
            f"{r['client_rx_bytes_per_step'] / 1024:.0f} "
            f"| {r['client_cores']:.2f} | {r['loadavg_1min_before']} |")
    out += ["", "Start-up per run: " + "; ".join(
        f"{r['nodes']} nodes ({r.get('protocol', 'per-rank')}): connect + join "
        f"{r['connect_s']:.1f} s, first step {r['first_step_s']:.2f} s ({r['num_samples']} "
        f"samples, {r['steps_per_epoch']} steps/epoch), coordinator peak RSS "
        f"{r['coordinator_peak_rss_mib']:.0f} MiB, {r['coordinator_fds']} fds" for r in rows) + "."]
    return "\n".join(out) + "\n"


def main(ctx, args):
    ctx.build(["//bench:coordinator_scale"])
    jsonl = os.path.join(ctx.tmpdir("runs"), "runs.jsonl")
    others = []
    for round_ in range(1, args.repeat + 1):
        for n in args.nodes.split():
            for protocol in args.protocols.split():
                if protocol not in ("per-node", "per-rank"):
                    raise RunFailed(f"--protocols: '{protocol}' is not per-node or per-rank")
                for pt in args.peer_threads.split():
                    for client in args.clients.split():
                        if client not in ("light", "rpc"):
                            raise RunFailed(f"--clients: '{client}' is not light or rpc")
                        # The per-rank protocol has only the RPC client (light is ignored).
                        flags = ((["--per-rank"] if protocol == "per-rank" else []) +
                                 (["--rpc-client"] if client == "rpc" else []))
                        others.append(f"round {round_}, {n} nodes, {protocol}, peer_threads "
                                      f"{pt}, {client} client: {busiest()}")
                        subprocess.run(
                            ["bazel-bin/bench/coordinator_scale", "--nodes", n,
                             "--ranks-per-node", args.ranks_per_node, "--steps-per-second",
                             args.steps_per_second, "--seconds", args.seconds, "--warmup",
                             args.warmup, "--batch", args.batch, "--spread", args.spread,
                             "--threads", args.threads, "--peer-threads", pt, *flags,
                             "--json", jsonl], check=True)
    with open(jsonl, encoding="utf-8") as f:
        lines = f.read()
    ctx.append("coordinator_scale.jsonl", lines, show=False)
    rows = [json.loads(line) for line in lines.splitlines()]
    ctx.append("coordinator_scale.md", heading(args.command) +
               f"Commit {commit(['daemon', 'schemas'])}.\n\n" + table(rows) +
               "\nBusiest other processes before each run (top, % of one core):\n\n" +
               "".join(f"- {line}\n" for line in others), show=False)
    print(f"coordinator_scale: appended to {ctx.results}/coordinator_scale.md and .jsonl")
    return 0
