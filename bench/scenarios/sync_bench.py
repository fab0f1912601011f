"""Training step time on CPU with 2 ranks (issue 4): Ember's gradient sync against PyTorch
DDP, the same models (the example CNN, ResNet-18 in its CIFAR form), batch, Adam and
synthetic data, one intra-op thread per rank. Configurations (ember_model_sync,
ember_data_parallel, ember_model_sync_gloo: bazel-bin/bench/sync_bench under ember-run;
torch_ddp: bench/ddp_baseline.py; and for context ember_barrier, ember_none_2, ember_none_1,
torch_none_1) run once per round, in an order rotated by the round. Appends two tables to
results/sync_cpu.md (step time per model, the median over rounds of each run's median step,
ratios the median of the rounds' ratios; then per-phase means) and every run's line to
results/sync_cpu.jsonl. Every process gets glibc's malloc thresholds fixed
(GLIBC_TUNABLES, bench/README.md says why); --default-malloc leaves glibc's defaults.

  bench/compare sync_bench [--rounds 3] [--cnn-batch 64] [--resnet-batch 32]
                           [--cnn-steps 40] [--resnet-steps 6] [--default-malloc]
"""

import collections
import json
import os
import statistics
import subprocess
import time

from emberd import Emberd
from scenarios import DAEMON_BUILD, EMBER_RUN, RunFailed, commit, heading, loadavg

NAME = "sync_bench"
SYNC_BENCH = "bazel-bin/bench/sync_bench"
MALLOC = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"
IMPLS = ("ember_model_sync", "ember_data_parallel", "ember_model_sync_gloo", "torch_ddp",
         "ember_barrier", "ember_none_2", "ember_none_1", "torch_none_1")
SYNC_FLAGS = {"ember_model_sync": ["--sync", "model_sync"],
              "ember_data_parallel": ["--sync", "data_parallel"],
              "ember_model_sync_gloo": ["--sync", "model_sync", "--collectives", "gloo"],
              "ember_barrier": ["--sync", "barrier"], "ember_none_2": ["--sync", "none"]}


def add_arguments(parser):
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cnn-batch", type=int, default=64)
    parser.add_argument("--resnet-batch", type=int, default=32)
    parser.add_argument("--cnn-steps", type=int, default=40)
    parser.add_argument("--resnet-steps", type=int, default=6)
    parser.add_argument("--default-malloc", action="store_true")


def _command(args, daemon, model, impl, jsonl):
    batch, steps, warmup = ((args.cnn_batch, args.cnn_steps, 5) if model == "cnn"
                            else (args.resnet_batch, args.resnet_steps, 2))
    common = ["--model", model, "--batch-size", str(batch), "--steps", str(steps), "--warmup",
              str(warmup), "--threads", "1", "--optimizer", "adam", "--json", jsonl]
    if impl in SYNC_FLAGS:
        return [EMBER_RUN, "--nproc", "2", "--socket", daemon.socket, "--", SYNC_BENCH,
                *SYNC_FLAGS[impl], *common]
    if impl == "ember_none_1":
        return [SYNC_BENCH, "--sync", "none", *common]
    ranks = ["--ranks", "2"] if impl == "torch_ddp" else ["--ranks", "1", "--no-ddp"]
    return ["/usr/bin/python3", "bench/ddp_baseline.py", *ranks, *common]


def report(records):
    """The two tables from the runs' records (each with its "round")."""
    runs = collections.defaultdict(list)  # (model, configuration) -> records
    for record in records:
        configuration = record["impl"]
        if configuration.endswith("_none"):
            configuration += f"_{record['ranks']}"
        runs[record["model"], configuration].append(record)

    def median(model, configuration, field="step_ms_median"):
        return statistics.median(r[field] for r in runs[model, configuration])

    def ratio(model, configuration, reference):
        by_round = {r["round"]: r["step_ms_median"] for r in runs[model, reference]}
        return statistics.median(r["step_ms_median"] / by_round[r["round"]]
                                 for r in runs[model, configuration] if r["round"] in by_round)

    out = ["Step time, ms (median over rounds of each run's median step on rank 0), 1 thread per "
           "rank, Adam; ratios: median over rounds of the round's ratio; no sync: each rank on "
           "its own", "",
           "| model | params | batch/rank | Ember ModelSync | Ember DataParallel | PyTorch DDP "
           "| ModelSync / DDP | DataParallel / DDP | ModelSync on Gloo / DDP | lockstep only, 2 "
           "ranks | no sync, 2 ranks | no sync, 1 rank: C++ | no sync, 1 rank: Python |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    models = sorted({model for model, _ in runs}, key=lambda m: m != "cnn")
    for model in models:
        params = {r["params"] for (m, _), rs in runs.items() if m == model for r in rs}
        if len(params) != 1:
            raise RunFailed(f"{model} has different parameter counts: {sorted(params)}")
        ms, dp, ddp = (median(model, c) for c in ("ember_model_sync", "ember_data_parallel",
                                                   "torch_ddp"))
        out.append(f"| {model} | {params.pop():,} | {runs[model, 'torch_ddp'][0]['batch']} "
                   f"| {ms:.1f} | {dp:.1f} | {ddp:.1f} "
                   f"| {ratio(model, 'ember_model_sync', 'torch_ddp'):.2f}x "
                   f"| {ratio(model, 'ember_data_parallel', 'torch_ddp'):.2f}x "
                   f"| {ratio(model, 'ember_model_sync_gloo', 'torch_ddp'):.2f}x "
                   f"| {median(model, 'ember_barrier'):.1f} | {median(model, 'ember_none_2'):.1f} "
                   f"| {median(model, 'ember_none_1'):.1f} | {median(model, 'torch_none_1'):.1f} |")
    out += ["", "Phases, ms per step (median over rounds of per-run means; backward includes "
            "DataParallel's and DDP's all-reduces, sync is ModelSync::AverageGradients); rank 0's "
            "process CPU time (all threads) and minor page faults per step", "",
            "| model | run | step (mean) | forward | backward | sync | optimizer | CPU | page faults |",
            "|---|---|---|---|---|---|---|---|---|"]
    for model in models:
        for configuration in IMPLS:
            cells = [median(model, configuration, f) for f in
                     ("step_ms_mean", "forward_ms", "backward_ms", "sync_ms", "optimizer_ms",
                      "cpu_ms")]
            out.append(f"| {model} | {configuration} | " + " | ".join(f"{c:.1f}" for c in cells)
                       + f" | {median(model, configuration, 'page_faults'):.0f} |")
    return "\n".join(out) + "\n"


def main(ctx, args):
    ctx.build([*DAEMON_BUILD, "//tools/ember_run:ember-run", "//bench:sync_bench"])
    tunables = "" if args.default_malloc else MALLOC
    if tunables:
        os.environ["GLIBC_TUNABLES"] = tunables
    jsonl = os.path.join(ctx.tmpdir("runs"), "runs.jsonl")
    records, load_before, started = [], loadavg(), time.monotonic()
    with Emberd(ctx.tmpdir("emberd")) as daemon:
        for round_ in range(args.rounds):
            for model in ("cnn", "resnet18"):
                for i in range(len(IMPLS)):
                    impl = IMPLS[(i + round_) % len(IMPLS)]
                    ctx.log(f"round {round_ + 1}/{args.rounds}: {model} {impl}")
                    done = subprocess.run(_command(args, daemon, model, impl, jsonl),
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True)
                    for line in done.stdout.splitlines():
                        if line.startswith(("sync_bench:", "ddp_baseline:", "rank 0:")):
                            print(line, flush=True)
                    with open(jsonl, encoding="utf-8") as f:
                        lines = f.read().splitlines()
                    if done.returncode != 0 or len(lines) != len(records) + 1:
                        ctx.fail(f"{model} {impl}", done.stdout)
                    records.append({**json.loads(lines[-1]), "round": round_})
    note = (f" ({time.monotonic() - started:.0f} s; load average before {load_before}, after "
            f"{loadavg()}; GLIBC_TUNABLES={tunables or 'unset'})")
    with open(jsonl, encoding="utf-8") as f:
        ctx.append("sync_cpu.jsonl", f.read(), show=False)
    ctx.append("sync_cpu.md", heading(args.command, note, f", commit {commit()}") + report(records))
    return 0
