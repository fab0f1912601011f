"""The JPEG pipeline (configs/pipelines/imagenet_train.yaml) at its decode limit, side by
side (issue 3): --rounds rounds, each running bazel-bin/bench/decode_limit (one process per
core, files in memory, no loader), Ember (loader_bench: emberd + R readers) on the folder
and on its pack, and the DataLoader (dataloader_baseline.py --imagefolder, R ranks x 2
workers, one retry); then the Ember readers' data wait with 50 ms steps, sleeping and
busy. Peak PSS summed over every process of a run. Appends to results/images.md a table
of medians over rounds (ratios: the median of each round's ratio) and the CPU time lost
to steal. The ranks only receive their batches; --touch makes both loaders read every
byte. Without --dir, --count 256x256 JPEGs are made from Fashion-MNIST.

  bench/compare image_bench [--dir DIR] [--count 2000] [--ranks 2] [--batch-size 64]
                            [--seconds 10] [--rounds 3] [--touch]
"""

import os
import statistics
import subprocess

import measure
from emberd import Emberd
from scenarios import DAEMON_BUILD, LOADER_BENCH, PIPELINE, heading, value

NAME = "image_bench"
RUNS = ("limit", "images", "images-packed", "dataloader")


def add_arguments(parser):
    parser.add_argument("--dir", help="a folder of JPEG class folders (default: made)")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--touch", action="store_true")


def _cpu_ticks():
    """(steal, total) ticks of /proc/stat's cpu line."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    return fields[7], sum(fields)


def _run(ctx, what, command, key, pids=(), tries=1):
    for attempt in range(1, tries + 1):
        measured = measure.run(command, pids=pids, timeout=600)
        rate = value(measured["output"], key)
        if measured["rc"] == 0 and rate is not None:
            print(measured["output"].strip().splitlines()[-1], flush=True)
            return rate, measured["peak_pss_mib"]
        ctx.log(f"{what} failed (attempt {attempt})")
    ctx.fail(what, measured["output"])


def main(ctx, args):
    ctx.build([*DAEMON_BUILD, "//bench:decode_limit", "//bench:loader_bench"])
    folder = args.dir
    if not folder:
        folder = os.path.join(ctx.tmpdir("jpegs"), "jpegs")
        subprocess.run(["/usr/bin/python3", "bench/make_jpeg_folder.py", folder, "--count",
                        str(args.count)], check=True)
    touch = ["--touch"] if args.touch else []
    sizes = ["--ranks", str(args.ranks), "--batch-size", str(args.batch_size),
             "--seconds", str(args.seconds), *touch]
    rate, pss = {r: {} for r in RUNS}, {r: [] for r in RUNS}
    with Emberd(ctx.tmpdir("emberd")) as daemon:
        packed = os.path.join(daemon.dir, "images.packed")
        daemon.ctl("dataset", "add", "images", "--format", "imagefolder", "--path", folder,
                   "--pipeline", PIPELINE)
        daemon.ctl("pack", folder, packed, "--quiet")
        daemon.ctl("dataset", "add", "images-packed", "--format", "packed", "--path", packed,
                   "--pipeline", PIPELINE)
        steal0, total0 = _cpu_ticks()
        for round_ in range(1, args.rounds + 1):
            ctx.log(f"round {round_}/{args.rounds}: decode limit ({os.cpu_count()} processes)")
            rate["limit"][round_], _ = _run(
                ctx, "decode_limit", ["bazel-bin/bench/decode_limit", "--dir", folder,
                                      "--pipeline", PIPELINE, "--seconds", str(args.seconds)],
                "images_per_s")
            for name in ("images", "images-packed"):
                ctx.log(f"round {round_}/{args.rounds}: Ember {name}")
                rate[name][round_], p = _run(ctx, f"loader_bench {name}",
                                             [LOADER_BENCH, "--socket", daemon.socket, name,
                                              *sizes], "samples_per_s", pids=[daemon.pid])
                pss[name].append(p)
            # Debian's torch 1.13 DataLoader now and then loses a worker to an abort
            # ("terminate called without an active exception"): one retry.
            ctx.log(f"round {round_}/{args.rounds}: PyTorch DataLoader, {args.ranks} ranks x 2 "
                    "workers")
            rate["dataloader"][round_], p = _run(
                ctx, "dataloader_baseline.py", ["/usr/bin/python3", "bench/dataloader_baseline.py",
                                                "--imagefolder", folder, *sizes, "--workers", "2"],
                "samples_per_s", tries=2)
            pss["dataloader"].append(p)
        steal1, total1 = _cpu_ticks()
        stall = {}
        for kind, flag in (("sleep", []), ("busy", ["--busy-compute"])):
            done = subprocess.run([LOADER_BENCH, "--socket", daemon.socket, "images", *sizes[:6],
                                   "--compute-ms", "50", "--touch", *flag],
                                  capture_output=True, text=True, check=True)
            stall[kind] = next((line.split()[2] for line in done.stdout.splitlines()
                                if line.startswith("data wait: ")), "?")
            ctx.log(f"data wait with 50 ms {kind} steps: {stall[kind]}")

    def median_ratio(a, b):
        return statistics.median(rate[a][r] / rate[b][r] for r in rate[a])

    files = sum(len(names) for _, _, names in os.walk(folder))
    reads = "read every byte of each batch" if args.touch else "only receive batches"
    text = heading(args.command, f"\n({PIPELINE}; {files} files; ranks {reads}; CPU time lost "
                                 f"to steal during the rounds: "
                                 f"{100 * (steal1 - steal0) / max(total1 - total0, 1):.1f}%)")
    labels = {"limit": f"decode limit ({os.cpu_count()} processes, no loader)",
              "images": f"Ember images (emberd + {args.ranks} readers)",
              "images-packed": f"Ember images-packed (emberd + {args.ranks} readers)",
              "dataloader": f"DataLoader, {args.ranks} ranks x 2 workers"}
    text += ("| run | images/s, median (per round) | vs DataLoader | vs decode limit "
             "| peak PSS, median | vs DataLoader |\n|---|---|---|---|---|---|\n")
    base_pss = statistics.median(pss["dataloader"])
    for run in RUNS:
        per_round = ", ".join(f"{rate[run][r]:,.0f}" for r in sorted(rate[run]))
        memory = (f"| {statistics.median(pss[run]):,.0f} MiB "
                  f"| {100 * statistics.median(pss[run]) / base_pss:.0f}% |" if pss[run] else "| | |")
        text += (f"| {labels[run]} | {statistics.median(rate[run].values()):,.0f} ({per_round}) "
                 f"| {median_ratio(run, 'dataloader'):.1f}x "
                 f"| {100 * median_ratio(run, 'limit'):.0f}% {memory}\n")
    text += (f"\nData wait of Ember readers with 50 ms steps: {stall['sleep']} of their time "
             f"(sleeping, a GPU step), {stall['busy']} (busy CPU step competing with decoding).\n")
    ctx.append("images.md", text)
    return 0
