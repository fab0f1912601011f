"""Loader throughput and memory on Fashion-MNIST train, side by side in one run:
bazel-bin/bench/loader_bench (emberd + R reader processes) against the PyTorch DataLoader
baseline (bench/dataloader_baseline.py: R ranks with 1, then 2 workers each), the same
data, ranks and batch size. Peak PSS summed over every process of a run (emberd and the
readers; the ranks and their workers). Appends a table to results/loader_fmnist.md.

  bench/compare loader_bench [--ranks 2] [--batch-size 64] [--seconds 10]
"""

import measure
from scenarios import DAEMON_BUILD, LOADER_BENCH, heading, value

NAME = "loader_bench"


def add_arguments(parser):
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10)


def _measured(ctx, what, command, pids=(), key="samples_per_s"):
    measured = measure.run(command, pids=pids, timeout=600)
    rate = value(measured["output"], key)
    if measured["rc"] != 0 or rate is None:
        ctx.fail(what, measured["output"])
    print(measured["output"].strip().splitlines()[-1], flush=True)
    return rate, measured["peak_pss_mib"]


def main(ctx, args):
    ctx.build([*DAEMON_BUILD, "//bench:loader_bench"])
    sizes = ["--ranks", str(args.ranks), "--batch-size", str(args.batch_size),
             "--seconds", str(args.seconds)]
    ctx.log(f"Ember: loader_bench (emberd + {args.ranks} readers)")
    with ctx.fmnist_daemon("emberd", splits=("train",)) as daemon:
        ember = _measured(ctx, "loader_bench", [LOADER_BENCH, "--socket", daemon.socket,
                                                "fmnist-train", *sizes], pids=[daemon.pid])
    base = {}
    for workers in (1, 2):
        ctx.log(f"PyTorch DataLoader: {args.ranks} ranks x {workers} workers")
        base[workers] = _measured(ctx, f"dataloader_baseline.py --workers {workers}",
                                  ["/usr/bin/python3", "bench/dataloader_baseline.py", *sizes,
                                   "--workers", str(workers)])
    ref_rate, ref_pss = base[2]
    rows = [(f"Ember (emberd + {args.ranks} readers)", *ember)] + [
        (f"DataLoader, {args.ranks} ranks x {w} workers", *base[w]) for w in (1, 2)]
    text = heading(args.command) + (
        "| loader | samples/s | vs DataLoader w=2 | peak PSS, all processes | vs DataLoader w=2 |\n"
        "|---|---|---|---|---|\n")
    for name, rate, pss in rows:
        text += (f"| {name} | {rate:.1f} | {rate / ref_rate:.1f}x | {pss:.0f} MiB "
                 f"| {100 * pss / ref_pss:.0f}% |\n")
    ctx.append("loader_fmnist.md", text)
    return 0
