"""scaling: ranks per node 1, 2, 4, 8 (one job) and concurrent jobs 1, 2, 4 (one rank
each) on one emberd, against torch's DataLoader (bench/dataloader_baseline.py
--imagefolder: ImageFolder + RandomResizedCrop(224) + flip, 1 worker per rank) doing the
same. The data: the bench JPEG folder (bench/make_jpeg_folder.py, 2,000 images of
256x256) packed (emberctl pack) for Ember, the folder itself for the DataLoader; the
pipeline configs/pipelines/imagenet_train.yaml; batch 64; the ranks only receive their
batches (as a GPU trainer's host side does). Per run: images/s over all ranks after 1 s of
warm-up, peak PSS over every process (emberd and the readers; ranks and workers), and
for Ember the ring slots each stream touched (emberctl status, mid-run). Each round also
measures the decode limit (bench/decode_limit: emberd's decode code, one process per
core, no loader)."""

import os
import re
import shlex
import threading
import time

import measure
from emberd import Emberd
from scenarios import Run, by_key, median, median_spread, figure, save_figure
from scenarios.images import decode_limit, folder, packed

NAME = "scaling"
TITLE = "Scaling: ranks and jobs on one node"
PIPELINE = "configs/pipelines/imagenet_train.yaml"
RANKS = (1, 2, 4, 8)
JOBS = (1, 2, 4)
BATCH = 64
SLOT_MIB = (BATCH * 3 * 224 * 224 + BATCH * 8) / 2**20
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//bench:loader_bench",
         "//bench:decode_limit"]


def prepare(ctx):
    ctx.build(BUILD)
    packed(ctx, "bench")


def _touched(daemon, seconds, out):
    """Polls emberctl status during the run: the most slots any stream touched, and its
    prefetch depth."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            text = daemon.ctl("status", timeout=10)
        except Exception:  # the daemon may be busy; try again
            text = ""
        for depth, touched in re.findall(r"\(depth (\d+), (\d+) touched\)", text):
            out["slots_touched"] = max(out.get("slots_touched", 0), int(touched))
            out["prefetch_depth"] = max(out.get("prefetch_depth", 0), int(depth))
        time.sleep(1)


def _ranks_or_jobs(command, ranks, jobs):
    """`command --ranks R` for one job, or J copies of `command --ranks 1` at once."""
    if jobs == 1:
        return [*command, "--ranks", str(ranks)]
    one = shlex.join([*command, "--ranks", "1"])
    return ["bash", "-c", " & ".join([one] * jobs) + " & wait"]


def _ember(ctx, ranks, jobs):
    daemon = Emberd(ctx.tmpdir("emberd"))
    try:
        daemon.ctl("dataset", "add", "images", "--format", "packed", "--path", packed(ctx, "bench"),
                   "--pipeline", PIPELINE)
        bench = ["bazel-bin/bench/loader_bench", "--socket", daemon.socket, "images",
                 "--batch-size", str(BATCH), "--seconds", str(ctx.seconds)]
        command = _ranks_or_jobs(bench, ranks, jobs)  # each loader_bench opens a job of its own
        seen = {}
        poll = threading.Thread(target=_touched, args=(daemon, ctx.seconds + 1, seen))
        poll.start()
        measured = measure.run(command, pids=[daemon.pid], timeout=600)
        poll.join()
    finally:
        daemon.close()
    out = measured.pop("output")
    rates = [float(x) for x in re.findall(r"bench: samples_per_s=([0-9.]+)", out)]
    if measured["rc"] != 0 or len(rates) != jobs:
        ctx.fail(f"ember ranks={ranks} jobs={jobs}", out)
    return {**measured, **seen, "images_per_s": sum(rates), "ranks": ranks, "jobs": jobs}


def _dataloader(ctx, ranks, jobs):
    base = ["/usr/bin/python3", "bench/dataloader_baseline.py", "--imagefolder", folder(ctx, "bench"),
            "--batch-size", str(BATCH), "--workers", "1", "--seconds", str(ctx.seconds)]
    command = _ranks_or_jobs(base, ranks, jobs)
    for attempt in (1, 2, 3):  # Debian's torch 1.13 workers sometimes abort at shutdown
        measured = measure.run(command, timeout=600)
        out = measured.pop("output")
        rates = [float(x) for x in re.findall(r"baseline: samples_per_s=([0-9.]+)", out)]
        if measured["rc"] == 0 and len(rates) == jobs:
            break
        if attempt == 3:
            ctx.fail(f"dataloader ranks={ranks} jobs={jobs}", out)
    return {**measured, "images_per_s": sum(rates), "ranks": ranks, "jobs": jobs}


def runs(ctx):
    out = [Run("decode-limit", "limit", lambda ctx: decode_limit(ctx, "bench"))]
    for r in RANKS:
        out.append(Run("ember", f"ranks={r}", lambda ctx, r=r: _ember(ctx, r, 1)))
        out.append(Run("dataloader", f"ranks={r}", lambda ctx, r=r: _dataloader(ctx, r, 1)))
    for j in JOBS[1:]:
        out.append(Run("ember", f"jobs={j}", lambda ctx, j=j: _ember(ctx, 1, j)))
        out.append(Run("dataloader", f"jobs={j}", lambda ctx, j=j: _dataloader(ctx, 1, j)))
    return out


def _case_value(runs_, case, system, key):
    r = runs_.get((case, system))
    return median(r, key) if r else None


def report(records):
    runs_ = by_key(records)
    limit = _case_value(runs_, "limit", "decode-limit", "images_per_s")
    lines = [f"Decode limit (emberd's decode, {os.cpu_count()} processes, no loader): "
             f"{median_spread(runs_[('limit', 'decode-limit')], 'images_per_s', '{:,.0f}')} "
             "images/s.", "",
             "| case | Ember images/s | vs decode limit | Ember PSS MiB | slots touched (depth) "
             "| DataLoader images/s | DataLoader PSS MiB | Ember images/s / DataLoader's |",
             "|---|---|---|---|---|---|---|---|"]
    cases = [f"ranks={r}" for r in RANKS] + [f"jobs={j}" for j in JOBS[1:]]
    for case in cases:
        e, d = runs_.get((case, "ember"), {}), runs_.get((case, "dataloader"), {})
        e_rate, d_rate = median(e, "images_per_s"), median(d, "images_per_s")
        lines.append(
            f"| {case} | {median_spread(e, 'images_per_s', '{:,.0f}')} "
            f"| {f'{100 * e_rate / limit:.0f}%' if e_rate and limit else ''} "
            f"| {median_spread(e, 'peak_pss_mib', '{:.0f}')} "
            f"| {median(e, 'slots_touched') or ''} ({median(e, 'prefetch_depth') or ''}) "
            f"| {median_spread(d, 'images_per_s', '{:,.0f}')} "
            f"| {median_spread(d, 'peak_pss_mib', '{:.0f}')} "
            f"| {f'{e_rate / d_rate:.1f}x' if e_rate and d_rate else ''} |")
    lines.append("")
    for system in ("ember", "dataloader"):
        one = _case_value(runs_, "ranks=1", system, "peak_pss_mib")
        eight = _case_value(runs_, f"ranks={RANKS[-1]}", system, "peak_pss_mib")
        four_jobs = _case_value(runs_, f"jobs={JOBS[-1]}", system, "peak_pss_mib")
        if one and eight:
            per_rank = (eight - one) / (RANKS[-1] - 1)
            text = f"{system}: each added rank costs {per_rank:.1f} MiB of PSS"
            if system == "ember":
                touched = _case_value(runs_, f"ranks={RANKS[-1]}", "ember", "slots_touched") or 0
                allowed = touched * SLOT_MIB + 10
                text += (f" (target: the {touched:.0f} slots it touched x {SLOT_MIB:.1f} MiB + 10 = "
                         f"{allowed:.1f} MiB: {'met' if per_rank <= allowed else '**missed**'})")
            if four_jobs:
                text += f"; each added job {(four_jobs - one) / (JOBS[-1] - 1):.1f} MiB"
            lines.append(text + ".")
    return "\n".join(lines)


def summary(records):
    """The README's rows: images/s and PSS by ranks and jobs, both loaders."""
    runs_ = by_key(records)
    cases = [f"ranks={r}" for r in RANKS] + [f"jobs={j}" for j in JOBS[1:]]
    lines = ["| images/s, PSS MiB | " + " | ".join(cases) + " |", "|---" * (len(cases) + 1) + "|"]
    for system in ("ember", "dataloader"):
        cells = []
        for c in cases:
            rate = _case_value(runs_, c, system, "images_per_s")
            pss = _case_value(runs_, c, system, "peak_pss_mib")
            cells.append(f"{rate:,.0f}, {pss:,.0f}" if rate and pss else "")
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(records, path):
    runs_ = by_key(records)
    fig, axes = figure(3, (13, 3.6))
    for system, color in (("ember", "tab:orange"), ("dataloader", "tab:gray")):
        xs = [r for r in RANKS if (f"ranks={r}", system) in runs_]
        axes[0].plot(xs, [_case_value(runs_, f"ranks={r}", system, "images_per_s") for r in xs],
                     "o-", color=color, label=system)
        axes[1].plot(xs, [_case_value(runs_, f"ranks={r}", system, "peak_pss_mib") for r in xs],
                     "o-", color=color, label=system)
        js = [j for j in JOBS if (f"jobs={j}" if j > 1 else "ranks=1", system) in runs_]
        axes[2].plot(js, [_case_value(runs_, f"jobs={j}" if j > 1 else "ranks=1", system,
                                      "peak_pss_mib") for j in js], "o-", color=color, label=system)
    limit = _case_value(runs_, "limit", "decode-limit", "images_per_s")
    if limit:
        axes[0].axhline(limit, linestyle="--", color="black", label="decode limit")
    axes[0].set(title="images/s", xlabel="ranks")
    axes[1].set(title="peak PSS, MiB", xlabel="ranks")
    axes[2].set(title="peak PSS, MiB", xlabel="concurrent jobs (1 rank each)")
    for ax in axes:
        ax.legend()
        ax.set_ylim(bottom=0)
    save_figure(fig, TITLE, path)
