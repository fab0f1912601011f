"""Share groups: J concurrent jobs (1, 2, 4, 8) of 1 rank each on one emberd, each job
alone (own) and all of them in one share group (shared: StreamOptions::share, one producer
for the jobs that read the same dataset with the same seed and shuffle: each sample
decoded once for all of them). The data: the bench JPEG folder (bench/make_jpeg_folder.py,
2,000 images of 256x256; --folder photos: bench/make_photo_folder.py's photographs) packed
(emberctl pack), as the scaling scenario reads it, and the folder itself (imagefolder);
the pipeline configs/pipelines/imagenet_train.yaml; batch 64. Each job is one
bench/loader_bench --ranks 1 (a job name of its own, seed 0 for all; with sharing
--share NAME, the same NAME for all) that only receives its batches. Per run: images/s
summed over the jobs after 1 s of warm-up, each job's images/s, peak PSS summed over
every process (emberd and the readers; bench/measure.py), the ring slots a stream
touched (emberctl status, mid-run), each shared stream's share counters from the daemon's
status after its window (batches served from the group's rows), how far apart the jobs'
windows began, and the CPU other processes of the machine took meanwhile (a build beside
the run). Interleaved: every
round runs every job count own and shared, the pair's order swapped every other round.
Targets (the share-groups issue): shared, each job reads at >= 90% of what one job alone
reads (own, 1 job, the same round; so 4 jobs >= 3.6x its images/s), and PSS grows by
at most 10 MiB per added job. Appends to results/share.md and results/share.jsonl.

  bench/compare share_bench [--rounds 2] [--seconds 8] [--jobs 1,2,4,8]
      [--formats packed,folder] [--folder bench|photos] [--stagger S] [--compute-ms MS]

--stagger S starts the jobs S seconds apart (default: all at once); --compute-ms MS gives
each job a sleeping step per batch, as a GPU trainer's (default: none).
"""

import datetime
import json
import os
import re
import shlex
import statistics
import threading

import measure
from emberd import Emberd
from scenarios import RunFailed, commit, heading, load1, loadavg, spread, append_record
from scenarios.images import PIPELINE, folder, packed
from scenarios.scaling import _touched

NAME = "share_bench"
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//bench:loader_bench"]
BATCH = 64
GROUP = "bench-share"
MODES = ("own", "shared")
# Targets: a shared job's images/s against one job alone, and PSS per added job.
PER_JOB_SHARE = 0.90
PSS_PER_JOB_MIB = 10.0


def add_arguments(parser):
    parser.add_argument("--rounds", "--repeat", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--seconds", type=float, default=8,
                        help="measured seconds per run, after 1 s of warm-up (default 8)")
    parser.add_argument("--jobs", default="1,2,4,8", help="job counts (default 1,2,4,8)")
    parser.add_argument("--formats", default="packed,folder",
                        help="packed, folder or both (default packed,folder)")
    parser.add_argument("--folder", default="bench", choices=("bench", "photos"),
                        help="the images: the bench JPEG folder (the scaling scenario's) or "
                             "the photographs (default bench)")
    parser.add_argument("--stagger", type=float, default=0,
                        help="seconds between one job's start and the next's (default 0: all "
                             "at once)")
    parser.add_argument("--compute-ms", type=float, default=0,
                        help="a sleeping step per batch in each job, as a GPU trainer's "
                             "(loader_bench --compute-ms; default 0: none)")


class _Others(threading.Thread):
    """Samples, every second, the CPU of the machine's processes that are not the run's
    (the run's: emberd and every process naming its socket): what a build beside the run
    took. result(): (CPU seconds, the three busiest commands)."""

    def __init__(self, daemon_pid, socket):
        super().__init__(daemon=True)
        self.daemon_pid, self.socket = daemon_pid, socket.encode()
        self.stop = threading.Event()
        self.first, self.last, self.names = {}, {}, {}
        self.mine = set()
        pid = os.getpid()
        while pid > 1:  # this process and its ancestors
            self.mine.add(pid)
            stat = measure._stat(pid)
            if stat is None:
                break
            pid = stat[0]

    def _sample(self, initial):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            if pid in self.mine or pid == self.daemon_pid:
                continue
            cpu = measure.cpu_seconds(pid)
            if cpu is None:
                continue
            if pid not in self.first:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if self.socket in f.read():
                            self.mine.add(pid)
                            continue
                except OSError:
                    continue
                # A process born during the run counts from 0.
                self.first[pid] = cpu if initial else 0.0
                try:
                    with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                        self.names[pid] = f.read().strip()
                except OSError:
                    self.names[pid] = "?"
            self.last[pid] = cpu

    def run(self):
        self._sample(True)
        while not self.stop.wait(1.0):
            self._sample(False)

    def result(self):
        self.stop.set()
        self.join()
        by_name = {}
        for pid, cpu in self.last.items():
            by_name[self.names[pid]] = by_name.get(self.names[pid], 0.0) + cpu - self.first[pid]
        top = sorted(((round(v, 1), k) for k, v in by_name.items() if v >= 0.5), reverse=True)[:3]
        return round(sum(by_name.values()), 1), [f"{k} {v}" for v, k in top]


def _command(bench, jobs, stagger):
    """`bench` J times at once (`stagger` seconds apart) in one shell, which fails if any
    of them failed."""
    one = shlex.join(bench)
    pause = f"sleep {stagger}; " if stagger > 0 else ""
    return ["bash", "-c", f"pids=(); for i in $(seq {jobs}); do {one} & pids+=($!); "
            f"[ $i -lt {jobs} ] && {{ {pause}:; }}; done; "
            "rc=0; for p in \"${pids[@]}\"; do wait $p || rc=1; done; exit $rc"]


def one_run(ctx, args, fmt, jobs, mode):
    daemon = Emberd(ctx.tmpdir("emberd"))
    try:
        path = packed(ctx, args.folder) if fmt == "packed" else folder(ctx, args.folder)
        daemon.ctl("dataset", "add", "images", "--format",
                   "packed" if fmt == "packed" else "imagefolder", "--path", path,
                   "--pipeline", PIPELINE)
        bench = ["bazel-bin/bench/loader_bench", "--socket", daemon.socket, "images",
                 "--ranks", "1", "--batch-size", str(BATCH), "--seconds", str(args.seconds)]
        if args.compute_ms > 0:
            bench += ["--compute-ms", str(args.compute_ms)]
        if mode == "shared":
            bench += ["--share", GROUP]
        seen = {}
        poll = threading.Thread(target=_touched, args=(daemon, args.seconds + 1, seen))
        others = _Others(daemon.pid, daemon.socket)
        others.start()
        poll.start()
        measured = measure.run(_command(bench, jobs, args.stagger), pids=[daemon.pid],
                               timeout=120 + 4 * args.seconds)
        poll.join()
        others_cpu, others_top = others.result()
    finally:
        daemon.close()
    # What emberd logged (warnings and errors: --log-level warn) about the run.
    log = [line.strip() for line in daemon.log_tail(400).splitlines() if line.strip()]
    out = measured.pop("output")
    measured.pop("cpu_series", None)
    rates = [float(x) for x in re.findall(r"bench: samples_per_s=([0-9.]+)", out)]
    if measured["rc"] != 0 or len(rates) != jobs:
        ctx.fail(f"share_bench {fmt} jobs={jobs} {mode}", out + "\nemberd's log:\n" + "\n".join(log[-10:]))
    counters = [dict(group=g, shared=int(s), published=int(p), consumed=int(c), touched=int(t))
                for g, s, p, c, t in re.findall(
                    r"share \S+: group=(\S+) shared_batches=(\d+) published=(\d+) consumed=(\d+) "
                    r"slots_touched=(\d+)", out)]
    # When the jobs' measured windows began (each 1 s after its first batch): how far apart
    # the jobs started.
    starts = [float(x) for x in re.findall(r"measuring from unix ([0-9.]+)", out)]
    record = {**measured, **seen, "format": fmt, "jobs": jobs, "mode": mode,
              "start_spread_s": round(max(starts) - min(starts), 3) if starts else None,
              "images_per_s": round(sum(rates), 1), "per_job_images_per_s": rates,
              "others_cpu_s": others_cpu, "others_top": others_top,
              "emberd_log_lines": len(log), "emberd_log": log[-5:]}
    if mode == "shared":
        record["share_status"] = len(counters)  # streams whose counters were found
        record["not_in_status"] = len(re.findall(r"share \S+: no stream of job", out))
        record["status_failed"] = len(re.findall(r"share \S+: status failed", out))
        record["shared_batches"] = sum(c["shared"] for c in counters)
        record["consumed_batches"] = sum(c["consumed"] for c in counters)
        record["published_batches"] = sum(c["published"] for c in counters)
        record["groups"] = sorted({c["group"] for c in counters})
        record["share_touched_max"] = max((c["touched"] for c in counters), default=None)
        record["share_counters"] = counters  # per stream
        # The lowest share of a stream's batches served from the group: a stream that fell
        # back to its own decoding (a member more than the window behind the furthest one).
        record["lowest_stream_shared"] = min(
            (c["shared"] / c["consumed"] for c in counters if c["consumed"]), default=None)
    return record


# A run beside which other processes took this many cores (CPU s / the run's wall s) is
# flagged as suspect.
SUSPECT_CORES = 0.2


def _others_cores(record):
    return record.get("others_cpu_s", 0) / max(record.get("wall_s") or 1, 1e-3)


def _fmt(values, f="{:,.0f}"):
    return spread(values, f)


def _med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def report(records, formats, jobs_list):
    """The tables and the verdicts, from every round's records."""
    by = {}
    for r in records:
        if "failed" not in r:
            by.setdefault((r["format"], r["jobs"], r["mode"]), {})[r["round"]] = r
    lines, verdicts, readme = [], [], []
    for fmt in formats:
        alone = by.get((fmt, 1, "own"), {})  # one job alone, per round
        lines += [f"**{fmt}**", "",
                  "| jobs | mode | images/s, all jobs | slowest job / median job "
                  "| slowest job / 1 job alone | all jobs / 1 job alone | peak PSS MiB "
                  "| PSS per added job MiB | slots touched | shared batches / consumed "
                  "| start spread s | load; others' cores |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for j in jobs_list:
            for mode in MODES:
                rr = by.get((fmt, j, mode), {})
                if not rr:
                    continue
                slowest = [min(r["per_job_images_per_s"]) for r in rr.values()]
                per_job_med = [statistics.median(r["per_job_images_per_s"]) for r in rr.values()]
                vs_alone = [min(r["per_job_images_per_s"]) / alone[k]["images_per_s"]
                            for k, r in rr.items() if k in alone]
                agg_alone = [r["images_per_s"] / alone[k]["images_per_s"]
                             for k, r in rr.items() if k in alone]
                base = by.get((fmt, 1, mode), {})
                growth = [(r["peak_pss_mib"] - base[k]["peak_pss_mib"]) / (j - 1)
                          for k, r in rr.items() if j > 1 and k in base]
                shared = ""
                if mode == "shared":
                    fractions = [r["shared_batches"] / r["consumed_batches"]
                                 for r in rr.values() if r.get("consumed_batches")]
                    lowest = [r.get("lowest_stream_shared") for r in rr.values()]
                    # Batches the members decoded themselves (published, not from the group).
                    own_decoded = "/".join(
                        str(sum(max(0, c["published"] - c["shared"]) for c in r.get("share_counters", [])))
                        for _, r in sorted(rr.items()))
                    shared = (f"{_fmt(fractions, '{:.2f}')}; lowest stream {_fmt(lowest, '{:.2f}')}; "
                              f"decoded by members {own_decoded}" if fractions else "no counters")
                    if any(r.get("not_in_status") or r.get("status_failed") for r in rr.values()):
                        shared += " (some streams not in the status)"
                load = "/".join(f"{r['loadavg_1min_before']:.1f}" for _, r in sorted(rr.items()))
                other = "/".join(f"{_others_cores(r):.2f}" for _, r in sorted(rr.items()))
                lines.append(
                    f"| {j} | {mode} | {_fmt([r['images_per_s'] for r in rr.values()])} "
                    f"| {_fmt([statistics.median(slowest)])} / {_fmt([statistics.median(per_job_med)])} "
                    f"| {_fmt(vs_alone, '{:.2f}')} | {_fmt(agg_alone, '{:.2f}x')} "
                    f"| {_fmt([r['peak_pss_mib'] for r in rr.values()])} "
                    f"| {_fmt(growth, '{:.1f}')} "
                    f"| {_fmt([r.get('slots_touched') for r in rr.values()])} "
                    f"| {shared} | {_fmt([r.get('start_spread_s') for r in rr.values()], '{:.2f}')} "
                    f"| {load}; {other} |")
        lines.append("")
        for j in jobs_list:
            rr = by.get((fmt, j, "shared"), {})
            base = by.get((fmt, 1, "shared"), {})
            if not rr or not alone:
                continue
            share = _med([min(r["per_job_images_per_s"]) / alone[k]["images_per_s"]
                          for k, r in rr.items() if k in alone])
            agg = _med([r["images_per_s"] / alone[k]["images_per_s"]
                        for k, r in rr.items() if k in alone])
            text = (f"- {fmt}, {j} job{'s' if j > 1 else ''} shared: the slowest job reads "
                    f"{100 * share:.0f}% of one job alone (target {100 * PER_JOB_SHARE:.0f}%: "
                    f"{'met' if share >= PER_JOB_SHARE else '**missed**'}); all jobs "
                    f"{agg:.2f}x (target {PER_JOB_SHARE * j:.1f}x)")
            growth = _med([(r["peak_pss_mib"] - base[k]["peak_pss_mib"]) / (j - 1)
                           for k, r in rr.items() if j > 1 and k in base])
            own = by.get((fmt, j, "own"), {})
            own_base = by.get((fmt, 1, "own"), {})
            own_growth = _med([(r["peak_pss_mib"] - own_base[k]["peak_pss_mib"]) / (j - 1)
                               for k, r in own.items() if j > 1 and k in own_base])
            own_one = _med([r["peak_pss_mib"] for r in alone.values()])
            shared_one = _med([r["peak_pss_mib"] for r in base.values()])
            if j == 1 and own_one and shared_one:
                text += (f"; PSS {shared_one - own_one:+.0f} MiB over one job alone (the "
                         "group's rows)")
            if growth is not None:
                text += (f"; PSS {growth:.1f} MiB per added job over 1 shared job (target "
                         f"{PSS_PER_JOB_MIB:.0f}: {'met' if growth <= PSS_PER_JOB_MIB else '**missed**'})")
                if own_growth is not None:
                    text += f", {own_growth:.1f} without sharing"
            verdicts.append(text + ".")
        if fmt == "packed":
            cells = []
            for j in (1, 2, 4):
                rr = by.get((fmt, j, "shared"), {})
                rate = _med([r["images_per_s"] for r in rr.values()])
                pss = _med([r["peak_pss_mib"] for r in rr.values()])
                cells.append(f"{rate:,.0f}, {pss:,.0f}" if rate and pss else "")
            readme = [f"| ember, share group | {cells[0]} |  |  |  | {cells[1]} | {cells[2]} |"]
    out = lines + verdicts
    if readme:
        out += ["", "A row for the README's scaling table (`bench/compare --scenario scaling`'s "
                "block; its columns ranks=1, 2, 4, 8, jobs=2, 4: here jobs 1, 2 and 4 in one "
                "share group, packed; pasted by hand, `--readme` rewrites that block from the "
                "scaling scenario only):", "", *readme]
    return "\n".join(out)


def main(ctx, args):
    jobs_list = [int(j) for j in args.jobs.split(",")]
    formats = args.formats.split(",")
    if jobs_list[0] != 1 or any(f not in ("packed", "folder") for f in formats) or args.rounds < 1:
        raise RunFailed("--jobs must start with 1 (the reference), --formats is packed and/or "
                         "folder, --rounds at least 1")
    ctx.build(BUILD)
    for fmt in formats:
        packed(ctx, args.folder) if fmt == "packed" else folder(ctx, args.folder)
    start = datetime.datetime.now(datetime.timezone.utc)
    load_start = loadavg()
    records = []
    jsonl = os.path.join(ctx.results, "share.jsonl")
    os.makedirs(ctx.results, exist_ok=True)
    for round_ in range(1, args.rounds + 1):
        # Every job count own and shared; the pair's order swapped every other round.
        modes = MODES if round_ % 2 else MODES[::-1]
        for fmt in formats:
            for j in jobs_list:
                for mode in modes:
                    load = load1()
                    ctx.log(f"round {round_}/{args.rounds}: {fmt} jobs={j} {mode} (load {load:.2f})")
                    try:
                        record = one_run(ctx, args, fmt, j, mode)
                    except Exception as e:  # noqa: BLE001 (one failed run loses its row)
                        ctx.log(f"{type(e).__name__}: {e}")
                        record = {"format": fmt, "jobs": j, "mode": mode,
                                  "failed": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
                    append_record(records, jsonl, record, round=round_,
                                  loadavg_1min_before=round(load, 2), folder=args.folder,
                                  command=args.command)
                    shown = {k: record.get(k) for k in ("images_per_s", "per_job_images_per_s",
                                                         "peak_pss_mib", "shared_batches",
                                                         "consumed_batches", "others_cpu_s",
                                                         "failed") if k in record}
                    ctx.log(f"  {json.dumps(shown)}")
    minutes = (datetime.datetime.now(datetime.timezone.utc) - start).total_seconds() / 60
    failed = [f"{r['format']} jobs={r['jobs']} {r['mode']} (round {r['round']}): {r['failed']}"
              for r in records if "failed" in r]
    others = [r for r in records if "failed" not in r and _others_cores(r) >= SUSPECT_CORES]
    note = (f" (commit {commit()}; {minutes:.0f} min; load averages at the start {load_start}, "
            f"at the end {loadavg()})")
    text = heading(args.command, note) + (
        f"The {args.folder} folder (2,000 JPEGs), {', '.join(formats)}; "
        f"{PIPELINE}; batch {BATCH}; J jobs of 1 rank each (bench/loader_bench --ranks 1, "
        f"a job name each, seed 0{f', a sleeping step of {args.compute_ms:g} ms per batch' if args.compute_ms else ''}), "
        f"started {f'{args.stagger:g} s apart' if args.stagger else 'at once'}; own: each job "
        f"alone, shared: all in share group `{GROUP}`; {args.seconds:g} s measured after 1 s "
        f"of warm-up; medians over "
        f"{args.rounds} round{'s' if args.rounds > 1 else ''} (min-max), ratios the median "
        "of each round's ratio to that round's 1 job alone (own). PSS: peak over 0.5 s "
        "samples, summed over emberd and the readers; per added job: (PSS(J) - PSS(1 job of "
        "the same mode)) / (J - 1). Shared batches: the shared streams' batches served from "
        "the group's rows / batches they consumed (daemon status after each window), over all "
        "streams and for the lowest one, and the batches the members decoded themselves "
        "(published less shared, per round: a member that fell back to its own decoding). Start "
        "spread: between the first and the last job's start of its measured window. Others' "
        "cores: the CPU seconds that processes outside the run took during it / its wall "
        "time (per round; a build beside the run).\n\n"
        + report(records, formats, jobs_list) + "\n")
    if others:
        busiest = sorted({name.rsplit(" ", 1)[0] for r in others for name in r["others_top"]})
        text += (f"\nOther work ran beside {len(others)} of the {len(records)} runs (processes "
                 f"outside the run took {SUSPECT_CORES} cores or more: {', '.join(busiest)}; "
                 "the others' cores column); their figures are suspect.\n")
    if failed:
        text += "\nFailed runs, left out: " + "; ".join(failed) + "\n"
    ctx.append("share.md", text)
    return 1 if failed else 0
