"""Where a training run's memory goes (issue 15): the Fashion-MNIST CNN, 2 ranks, each
variant under bench/measure.py's breakdown (the peak PSS sample, per process: Pss and its
anonymous, file-backed and shared-memory pages):
  cpp                the example C++ trainer fed by a private emberd, evaluation included
  cpp-train          the same stopped after its last training step, no evaluation
  python-none        bench/python_ddp.py --loader none: the floor of any Python loader
  python-ember       bench/python_ddp.py --loader ember, fed by a private emberd
  python-dataloader  bench/python_ddp.py --loader dataloader --workers 1
Appends the breakdowns to results/footprint.md.

  bench/compare footprint [--epochs 2]
                          [--variants "cpp cpp-train python-none python-ember python-dataloader"]
"""

import os

import measure
from scenarios import DAEMON_BUILD, EMBER_RUN, RunFailed, TRAINER, heading

NAME = "footprint"
VARIANTS = ("cpp", "cpp-train", "python-none", "python-ember", "python-dataloader")


def add_arguments(parser):
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--variants", default=" ".join(VARIANTS))


def main(ctx, args):
    ctx.build([*DAEMON_BUILD, "//tools/ember_run:ember-run", "//sdk/examples:fashion_mnist_train",
               "//sdk/python:ember"])
    steps = -(-60000 // 128) * args.epochs  # global steps of 2 x 64 (the tail rule: ceil)
    trainer = [TRAINER, "--train-dataset", "fmnist-train", "--test-dataset", "fmnist-test",
               "--epochs", str(args.epochs), "--batch-size", "64", "--lr", "0.001"]
    python_ddp = ["/usr/bin/python3", "bench/python_ddp.py", "--task", "fmnist", "--epochs",
                  str(args.epochs), "--batch-size", "64"]
    titles = {"cpp": "cpp: C++ trainer, evaluation included",
              "cpp-train": f"cpp-train: C++ trainer, stopped after step {steps}, no evaluation",
              "python-none": "python-none: bench/python_ddp.py --loader none (no loader)",
              "python-ember": "python-ember: bench/python_ddp.py --loader ember",
              "python-dataloader": "python-dataloader: bench/python_ddp.py --loader dataloader "
                                   "--workers 1"}
    text = ""
    for variant in args.variants.split():
        if variant not in VARIANTS:
            raise RunFailed(f"unknown variant '{variant}'")
        ctx.log(titles[variant])
        store = ["--store", ctx.tmpdir("store") + "/store"]
        program = {"cpp": trainer, "cpp-train": [*trainer, "--stop-after-steps", str(steps)],
                   "python-none": [*python_ddp, "--loader", "none", *store],
                   "python-ember": [*python_ddp, "--loader", "ember", *store],
                   "python-dataloader": [*python_ddp, "--loader", "dataloader", "--workers", "1",
                                         *store]}[variant]
        daemon = ctx.fmnist_daemon(variant) if variant in ("cpp", "cpp-train", "python-ember") else None
        try:
            socket = ["--socket", daemon.socket] if daemon else []
            measured = measure.run([EMBER_RUN, "--nproc", "2", *socket, "--", *program],
                                   env={**os.environ, "PYTHONPATH": ctx.python_ember()},
                                   pids=[daemon.pid] if daemon else [], timeout=3600,
                                   breakdown=True)
        finally:
            if daemon:
                daemon.close()
        if measured["rc"] != 0:
            ctx.fail(variant, measured["output"])
        text += (f"**{titles[variant]}** (peak PSS sample; MiB per process: Pss, Pss_Anon, "
                 f"Pss_File, Pss_Shmem)\n\n```\n"
                 f"{measure.format_breakdown(measured['peak_breakdown'])}\n```\n\n")
    ctx.append("footprint.md", heading(args.command) + text)
    return 0
