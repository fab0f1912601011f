"""Handing batches to Python (issue 28's benchmark): the `ember` package built from this
tree against an earlier build of it (--baseline: a directory holding that build's `ember`
package, e.g. the torch-linked module before DLPack), in interleaved rounds against one
emberd serving Fashion-MNIST. Each run is bench/handoff_worker.py in a fresh
/usr/bin/python3: --epochs epochs of batch 64 doing nothing but look at one label, so
that the time is the loader's own. Variants: the baseline (torch tensors), this tree with
output="torch", and this tree with output="numpy" (no torch imported). Reports batches/s,
the median and p99 time of one next(), and the rank's PSS, and each variant's ratio to
the baseline's (per round, then the median). Appends to results/python_handoff.md.

  bench/compare python_handoff --baseline DIR [--rounds 5] [--epochs 3]

To make a baseline of commit REV:
  git worktree add /tmp/ember-REV REV && (cd /tmp/ember-REV && bazel build //sdk/python:ember)
  mkdir -p /tmp/base/ember && cp /tmp/ember-REV/sdk/python/ember/*.py \\
      /tmp/ember-REV/bazel-bin/sdk/python/ember/_ember.so /tmp/base/ember/
"""

import json
import os
import statistics
import subprocess

from scenarios import DAEMON_BUILD, commit, heading, load1, torch_version

NAME = "python_handoff"
KEYS = ("batches_per_s", "next_median_us", "next_p99_us", "pss_mib")


def add_arguments(parser):
    parser.add_argument("--baseline", required=True,
                        help="a directory holding an earlier build's `ember` package")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)


def one_run(daemon, package, output, epochs):
    cmd = ["/usr/bin/python3", "bench/handoff_worker.py", "--socket", daemon.socket,
           "--dataset", "fmnist-train", "--epochs", str(epochs)]
    if output:
        cmd += ["--output", output]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": package})
    if done.returncode != 0:
        raise RuntimeError(f"handoff_worker ({package}, {output}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(ctx, args):
    ctx.build(DAEMON_BUILD)
    variants = {"baseline (torch)": (os.path.abspath(args.baseline), None),
                "this tree, torch": (ctx.python_ember(), "torch"),
                "this tree, numpy": (ctx.python_ember(), "numpy")}
    ctx.python_ember()  # built before the daemon starts
    daemon = ctx.fmnist_daemon("emberd", splits=("train",))
    runs = {name: [] for name in variants}
    loads = []
    try:
        names = list(variants)
        for round_ in range(args.rounds):
            for k in range(len(names)):  # each round starts with another variant
                name = names[(k + round_) % len(names)]
                loads.append(f"{load1():.2f}")
                record = one_run(daemon, *variants[name], args.epochs)
                ctx.log(f"round {round_ + 1}: {name}: {record}")
                runs[name].append(record)
    finally:
        daemon.close()
    base = runs["baseline (torch)"]
    rows = []
    for name, records in runs.items():
        cells = []
        for key in KEYS:
            median = statistics.median(r[key] for r in records)
            ratio = statistics.median(r[key] / b[key] for r, b in zip(records, base))
            cells.append(f"{median:,.1f} ({ratio:.3f}x)")
        torch_seen = "yes" if any(r["torch_imported"] for r in records) else "no"
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {torch_seen} |")
    text = heading(args.command) + (
        f"Commit {commit()}; torch {torch_version()}; Fashion-MNIST train, batch 64, "
        f"{args.epochs} epochs a run ({base[0]['batches']} batches), {args.rounds} rounds "
        f"interleaved; 1-minute load before each run: {' '.join(loads)}. Medians over the "
        f"rounds, and (in brackets) the median of each round's ratio to the baseline.\n\n"
        "| variant | batches/s | next() median, us | next() p99, us | rank PSS MiB | torch imported |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    ctx.append("python_handoff.md", text)
    return 0
