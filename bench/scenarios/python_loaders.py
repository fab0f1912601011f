"""torch's DataLoader against ember.Loader in one Python DDP training script (issue 14):
bench/python_ddp.py, 2 ranks under ember-run, identical but for the loader: the DataLoader
(DistributedSampler, persistent workers, pin_memory off) with 1, 2 and 4 workers per rank,
and ember.Loader fed by a private emberd started afresh for each of its runs (its memory
and loading count). Tasks: fmnist (the example CNN, --epochs epochs, then test accuracy)
and jpeg (a --count JPEG folder through configs/pipelines/imagenet_train.yaml, a small CNN
step, --steps steps per rank). Per run: wall time of the whole ember-run, train time,
images/s or accuracy, peak PSS summed over every process of the run (emberd included for
Ember). The four systems run interleaved, --rounds rounds per task. Appends every run to
results/python_loaders.jsonl and a table per task to results/python_loaders.md.

  bench/compare python_loaders [--rounds 2] [--tasks "fmnist jpeg"] [--epochs 2]
                               [--count 2000] [--steps 150] [--jpeg-batch 32]
"""

import collections
import json
import os
import platform
import statistics
import subprocess
import time

import measure
from scenarios import DAEMON_BUILD, EMBER_RUN, PIPELINE, heading, load1, torch_version, value

NAME = "python_loaders"
SYSTEMS = ("dataloader1", "dataloader2", "dataloader4", "ember")
NAMES = {"dataloader1": "DataLoader, 1 worker/rank", "dataloader2": "DataLoader, 2 workers/rank",
         "dataloader4": "DataLoader, 4 workers/rank", "ember": "ember.Loader (+ emberd)"}


def add_arguments(parser):
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tasks", default="fmnist jpeg")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--jpeg-batch", type=int, default=32)


def one_run(ctx, args, task, system, jpegs):
    """One run's record (python_ddp's figures, wall_seconds, peak_pss_mib)."""
    if task == "fmnist":
        flags = ["--task", "fmnist", "--epochs", str(args.epochs), "--batch-size", "64"]
    else:
        flags = ["--task", "jpeg", "--steps", str(args.steps), "--batch-size",
                 str(args.jpeg_batch), "--folder", jpegs, "--dataset", "images"]
    daemon = None
    if system == "ember":
        daemon = ctx.fmnist_daemon("emberd")
        if task == "jpeg":
            daemon.ctl("dataset", "add", "images", "--format", "imagefolder", "--path", jpegs,
                       "--pipeline", PIPELINE)
        flags += ["--loader", "ember"]
    else:
        flags += ["--loader", "dataloader", "--workers", system[len("dataloader"):]]
    try:
        # Debian's torch 1.13 DataLoader now and then loses a worker to an abort at
        # shutdown: one retry.
        for attempt in (1, 2):
            socket = ["--socket", daemon.socket] if daemon else []
            measured = measure.run(
                [EMBER_RUN, "--nproc", "2", *socket, "--", "/usr/bin/python3",
                 "bench/python_ddp.py", *flags, "--store", ctx.tmpdir("store") + "/store"],
                env={**os.environ, "PYTHONPATH": ctx.python_ember()},
                pids=[daemon.pid] if daemon else [], timeout=3600)
            lines = [line for line in measured["output"].splitlines()
                     if line.startswith("python_ddp: ")]
            if lines:
                break
            ctx.log(f"the run failed (attempt {attempt})")
            if attempt == 2:
                ctx.fail(f"{task} {system}", measured["output"])
    finally:
        if daemon:
            daemon.close()
    line = lines[-1]
    print(f"{line} peak_pss_mib={measured['peak_pss_mib']:.0f}", flush=True)
    return {"wall_seconds": measured["wall_s"], "peak_pss_mib": round(measured["peak_pss_mib"]),
            **{k: value(line, k) for k in ("train_seconds", "images_per_s", "test_accuracy")},
            **{k: int(value(line, k)) for k in ("steps", "batch", "ranks")}}


def table(task, runs):
    def median(system, key):
        return statistics.median(r[key] for r in runs[task, system].values())

    def ratio(system, base, key):  # the median over the rounds of both of the round's ratio
        return statistics.median(runs[task, system][r][key] / runs[task, base][r][key]
                                 for r in runs[task, system] if r in runs[task, base])

    dls = [s for s in SYSTEMS[:3] if (task, s) in runs]
    best = min(dls, key=lambda s: median(s, "wall_seconds"))
    quality, qkey = (("test accuracy", "test_accuracy") if task == "fmnist"
                     else ("images/s", "images_per_s"))
    out = [f"**{task}** (best DataLoader by wall time: {NAMES[best]})", "",
           f"| loader | wall s, median (per round) | train s | {quality} | peak PSS MiB, median "
           "| Ember time / this | Ember PSS / this |", "|---|---|---|---|---|---|---|"]
    for system in dls + ["ember"]:
        per_round = ", ".join(f"{r['wall_seconds']:.1f}" for _, r in sorted(runs[task, system].items()))
        q = median(system, qkey)
        versus = ("| | |" if system == "ember" else
                  f"| {ratio('ember', system, 'wall_seconds'):.2f}x "
                  f"| {ratio('ember', system, 'peak_pss_mib'):.2f}x |")
        out.append(f"| {NAMES[system]} | {median(system, 'wall_seconds'):.1f} ({per_round}) "
                   f"| {median(system, 'train_seconds'):.1f} "
                   f"| {f'{q:.4f}' if task == 'fmnist' else f'{q:,.0f}'} "
                   f"| {median(system, 'peak_pss_mib'):,.0f} {versus}")
    return "\n".join(out) + "\n\n"


def main(ctx, args):
    ctx.build([*DAEMON_BUILD, "//tools/ember_run:ember-run", "//sdk/python:ember"])
    tasks = args.tasks.split()
    jpegs = os.path.join(ctx.tmpdir("jpegs"), "jpegs")
    if "jpeg" in tasks:
        subprocess.run(["/usr/bin/python3", "bench/make_jpeg_folder.py", jpegs, "--count",
                        str(args.count)], check=True, stdout=subprocess.DEVNULL)
    runs, loads, lines = collections.defaultdict(dict), [], []
    for task in tasks:
        for round_ in range(1, args.rounds + 1):
            # Each round starts with another system, so that none always follows the same one.
            for k in range(len(SYSTEMS)):
                system = SYSTEMS[(k + round_ - 1) % len(SYSTEMS)]
                load = load1()
                loads.append(f"{load:.2f}")
                ctx.log(f"round {round_}/{args.rounds}: {task} {system} (load {load:.2f})")
                record = {"round": round_, "task": task, "system": system,
                          **one_run(ctx, args, task, system, jpegs)}
                runs[task, system][round_] = record
                lines.append(json.dumps({
                    "tool": "python_loaders", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "host": platform.node(), "cpus": os.cpu_count(),
                    "loadavg_1min_before": round(load, 2), "torch": torch_version(), **record}))
    ctx.append("python_loaders.jsonl", "".join(line + "\n" for line in lines), show=False)
    note = (f"\n(2 ranks under ember-run, torch {torch_version()}, 1 torch thread per rank; "
            f"1-minute load before each run: {' '.join(loads)})")
    ctx.append("python_loaders.md", heading(args.command, note) +
               "".join(table(task, runs) for task in tasks))
    return 0

