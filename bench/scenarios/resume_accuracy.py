"""Resuming from a mid-epoch checkpoint on another world size against an uninterrupted run
(issue 12), with the example trainer on Fashion-MNIST: 2 ranks x B for E epochs straight
through, and 2 ranks x B stopped after --stop-after global steps (after its checkpoint),
resumed on 1 rank x B' (default 2B: the same global batch) to the end. Both write sample
logs; each run's logs must hold every sample exactly once per epoch. Prints both test
accuracies and their difference (target: within 0.5 points), appends one JSON line to
results/resume_accuracy.jsonl; exit status 1 if a check fails.

  bench/compare resume_accuracy [--epochs 2] [--batch-size 64] [--stop-after 235]
                                [--resume-batch-size 128] [--seed 0]
"""

import collections
import glob
import json
import os
import platform
import re
import subprocess
import time

from scenarios import DAEMON_BUILD, EMBER_RUN, TRAINER, load1, value

NAME = "resume_accuracy"
SAMPLES = 60000  # Fashion-MNIST's train split
MAX_DIFF_POINTS = 0.5


def add_arguments(parser):
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--stop-after", type=int, default=235,
                        help="global steps (of 469 an epoch at 2 x 64: the middle of epoch 0)")
    parser.add_argument("--resume-batch-size", type=int, help="default: 2 x --batch-size")
    parser.add_argument("--seed", type=int, default=0)


def exactly_once(directory, epochs):
    """True if the rank logs in directory hold each sample once per epoch (counts shown)."""
    seen = collections.Counter()
    for path in glob.glob(os.path.join(directory, "rank-*.log")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                seen[int(fields[0]), int(fields[3])] += 1
    repeated = sum(1 for n in seen.values() if n > 1)
    bad = sum(1 for _, sample in seen if sample >= SAMPLES)
    print(f"  {len(seen)} distinct (epoch, sample) pairs of {epochs * SAMPLES}, {repeated} "
          f"repeated, {bad} out of range")
    return len(seen) == epochs * SAMPLES and repeated == 0 and bad == 0


def main(ctx, args):
    resume_batch = args.resume_batch_size or 2 * args.batch_size
    ctx.build([*DAEMON_BUILD, "//tools/ember_run:ember-run", "//sdk/examples:fashion_mnist_train"])
    load_before = load1()
    tmp = ctx.tmpdir("runs")

    def train(daemon, ranks, batch, *flags):
        done = subprocess.run([EMBER_RUN, "--nproc", str(ranks), "--socket", daemon.socket, "--",
                               TRAINER, "--epochs", str(args.epochs), "--batch-size", str(batch),
                               "--seed", str(args.seed), *flags],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(done.stdout, end="")
        if done.returncode != 0:
            ctx.fail("the trainer", done.stdout)
        return done.stdout

    with ctx.fmnist_daemon("emberd") as daemon:
        ctx.log(f"uninterrupted: 2 ranks x {args.batch_size}, {args.epochs} epochs")
        full = train(daemon, 2, args.batch_size, "--sample-log", f"{tmp}/full-samples")
        ctx.log(f"interrupted: 2 ranks x {args.batch_size}, stopped after {args.stop_after} steps")
        train(daemon, 2, args.batch_size, "--sample-log", f"{tmp}/resumed-samples",
              "--checkpoint", f"{tmp}/ckpt", "--stop-after-steps", str(args.stop_after))
        ctx.log(f"resumed: 1 rank x {resume_batch}")
        second = train(daemon, 1, resume_batch, "--sample-log", f"{tmp}/resumed-samples",
                       "--checkpoint", f"{tmp}/ckpt")
    full_accuracy, resumed_accuracy = value(full, "test_accuracy"), value(second, "test_accuracy")
    resumed_from = re.search(r"^resumed: from \S* (at epoch \d+ step \d+)", second, re.M)
    if full_accuracy is None or resumed_accuracy is None or resumed_from is None:
        ctx.fail("the trainer (no result or resume line)", second)
    print("== exactly once per epoch\n uninterrupted:")
    full_once = exactly_once(f"{tmp}/full-samples", args.epochs)
    print(" interrupted and resumed:")
    resumed_once = exactly_once(f"{tmp}/resumed-samples", args.epochs)
    diff = round(100 * (resumed_accuracy - full_accuracy), 2)
    within = abs(diff) <= MAX_DIFF_POINTS
    print(f"resume_accuracy: uninterrupted test_accuracy={full_accuracy} (2 x {args.batch_size}) "
          f"resumed test_accuracy={resumed_accuracy} (2 x {args.batch_size}, "
          f"{resumed_from.group(1)}, then 1 x {resume_batch}) difference={diff:.2f} points "
          f"(within {MAX_DIFF_POINTS}: {str(within).lower()}) exactly_once: "
          f"uninterrupted={str(full_once).lower()} resumed={str(resumed_once).lower()}")
    record = {"tool": "resume_accuracy", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "host": platform.node(), "cpus": os.cpu_count(),
              "loadavg_1min_before": round(load_before, 2), "command": args.command,
              "dataset": "fmnist-train", "epochs": args.epochs, "batch": args.batch_size,
              "stop_after_steps": args.stop_after, "resume_ranks": 1, "resume_batch": resume_batch,
              "resumed_from": resumed_from.group(1), "uninterrupted_accuracy": full_accuracy,
              "uninterrupted_train_seconds": value(full, "train_seconds"),
              "resumed_accuracy": resumed_accuracy, "difference_points": diff,
              "within_target": within, "exactly_once_uninterrupted": full_once,
              "exactly_once_resumed": resumed_once}
    ctx.append("resume_accuracy.jsonl", json.dumps(record) + "\n", show=False)
    return 0 if full_once and resumed_once and within else 1
