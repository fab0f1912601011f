"""End-to-end training time against its compute floor (issue 4). Each repeat N (seed N):
the example trainer (sdk/examples/fashion_mnist_train) on R ranks under ember-run, fed by
a private emberd, gradients through shared memory: its train_seconds, steps, rank 0's data
wait and test accuracy; bazel-bin/bench/compute_floor with those steps (the same model,
Adam and batch on data in memory, one single-threaded process, no Ember, no sync); and R
floors side by side (what keeping R cores busy costs by itself). Target: trainer <= 1.15x
floor. Appends a row per repeat to results/train_e2e.md, and the median ratio.

  bench/compare train_bench [--ranks 2] [--epochs 2] [--batch-size 64] [--repeat 1]
"""

import re
import statistics
import subprocess

from scenarios import DAEMON_BUILD, EMBER_RUN, FMNIST, TRAINER, heading, value

NAME = "train_bench"
COMPUTE_FLOOR = "bazel-bin/bench/compute_floor"


def add_arguments(parser):
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)


def _epoch_sum(output, name):
    return sum(float(v) for v in re.findall(rf"^epoch .* {name}=([0-9.]+)", output, re.M))


def floor_command(args, steps, seed):
    return [COMPUTE_FLOOR, "--data", FMNIST, "--steps", str(steps), "--batch-size",
            str(args.batch_size), "--seed", str(seed)]


def main(ctx, args):
    ctx.build([*DAEMON_BUILD, "//tools/ember_run:ember-run", "//sdk/examples:fashion_mnist_train",
               "//bench:compute_floor"])
    rows, ratios = [], []
    with ctx.fmnist_daemon("emberd") as daemon:
        for run in range(1, args.repeat + 1):
            ctx.log(f"run {run}/{args.repeat}: trainer, {args.ranks} ranks x {args.epochs} "
                    f"epochs, batch {args.batch_size}")
            done = subprocess.run([EMBER_RUN, "--nproc", str(args.ranks), "--socket",
                                   daemon.socket, "--job", f"bench-{run}", "--", TRAINER,
                                   "--epochs", str(args.epochs), "--batch-size",
                                   str(args.batch_size), "--seed", str(run)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            print(done.stdout, end="")
            train_s, steps = value(done.stdout, "train_seconds"), int(_epoch_sum(done.stdout, "steps"))
            if done.returncode != 0 or train_s is None or not steps:
                ctx.fail("the trainer", done.stdout)
            wait_s = _epoch_sum(done.stdout, "loader_wait_seconds")
            accuracy = value(done.stdout, "test_accuracy")

            ctx.log(f"run {run}/{args.repeat}: compute floor, {steps} steps")
            floor = subprocess.run(floor_command(args, steps, run), capture_output=True,
                                   text=True, check=True).stdout
            print(floor, end="")
            floor_s = value(floor, "seconds")

            ctx.log(f"run {run}/{args.repeat}: {args.ranks} compute floors side by side")
            side = [subprocess.Popen(floor_command(args, steps, run), stdout=subprocess.PIPE,
                                     text=True) for _ in range(args.ranks)]
            side_s = statistics.mean(value(p.communicate()[0], "seconds") for p in side)
            ratios.append(train_s / floor_s)
            rows.append(f"| {run} | {steps} | {floor_s:.2f} | {train_s:.2f} | {ratios[-1]:.2f}x "
                        f"| {side_s:.2f} ({side_s / floor_s:.2f}x) | {wait_s:.2f} | {accuracy} |")
    text = heading(args.command) + (
        f"| run | steps per rank | floor s (1 process, 1 thread) | Ember trainer s ({args.ranks} "
        f"ranks) | trainer / floor | {args.ranks} floors side by side, mean s (/ floor) "
        "| rank 0 data wait s | test accuracy |\n|---|---|---|---|---|---|---|---|\n")
    text += "\n".join(rows) + "\n"
    if args.repeat > 1:
        text += (f"\nMedian trainer / floor over the {args.repeat} runs: "
                 f"{statistics.median(ratios):.2f}x\n")
    ctx.append("train_e2e.md", text)
    return 0
