#!/usr/bin/python3
"""Runs one command of a benchmark and measures what the whole run cost: wall time, peak
PSS summed over every process of the run, and CPU seconds.

"Every process of the run" is the union, at each 0.5 s sample, of
  - the command's process tree (children of children, ...),
  - every process in the command's session (it starts in a new one, so daemons that
    double-fork stay counted unless they call setsid themselves),
  - every process whose command line contains one of `match` (e.g. Ray's --temp-dir of
    this run: its GCS, raylet and workers say it in their arguments),
  - the `pids` given (e.g. an emberd started before the command).
PSS is /proc/PID/smaps_rollup's: shared pages (libraries, the object store, rings) are
split among the processes that map them, so the sum counts each page once.
CPU seconds: utime + stime of each process seen, the last value read before it exited
(a process that lives less than one sample interval is missed; the benchmarks' processes
live for the whole run).

This is the benchmarks' one PSS sampler: bench/compare's scenarios and subcommands, the
baselines and bench/datasets_scale.py all measure through it. Used as a module
(`run(...)`, `rollup(pid)`, `cpu_seconds(pid)`) and as a program:
  bench/measure.py [--pid PID]... [--match TEXT]... [--breakdown] -- COMMAND...
prints one JSON object: {"wall_s", "peak_pss_mib", "cpu_s", "processes", "rc"};
--breakdown also prints, on stderr, where the memory of the sample with the largest total
went: each process's Pss split into anonymous, file-backed and shared-memory pages (MiB).
"""

import argparse
import json
import os
import subprocess
import sys
import time

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The smaps_rollup fields of a breakdown: Pss and its anonymous, file and shmem parts.
BREAKDOWN = ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem")


def _read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


def _stat(pid):
    """(ppid, sid, cpu seconds) of pid, or None once it is gone."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text[text.rfind(")") + 2:].split()
    # fields[0] is field 3 (state): ppid is field 4, session 6, utime 14, stime 15.
    return int(fields[1]), int(fields[3]), (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def rollup(pid, fields=BREAKDOWN):
    """{field: MiB} of /proc/PID/smaps_rollup for the `fields` it has; None if pid is gone."""
    text = _read(f"/proc/{pid}/smaps_rollup")
    if not text:
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in fields:
            values[key] = int(rest.split()[0]) / 1024
    return values


def pss_mib(pid):
    """The Pss of one process in MiB, 0 if it is gone."""
    return (rollup(pid, ("Pss",)) or {}).get("Pss", 0.0)


def cpu_seconds(pid):
    """utime + stime of pid (its ended threads included), None if it is gone."""
    s = _stat(pid)
    return None if s is None else s[2]


def command_of(pid, words=4, width=70):
    """The first `words` words of pid's command line, at most `width` characters."""
    argv = (_read(f"/proc/{pid}/cmdline", "rb") or b"").split(b"\0")
    return " ".join(a.decode(errors="replace") for a in argv[:words] if a)[:width]


def _all_pids():
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def run_processes(root, sid, match, pids):
    """The pids that belong to the run now."""
    stats = {}
    for pid in _all_pids():
        s = _stat(pid)
        if s is not None:
            stats[pid] = s
    members = {pid for pid in pids if pid in stats}
    if root in stats:
        members.add(root)
    by_parent = {}
    for pid, (ppid, psid, _) in stats.items():
        by_parent.setdefault(ppid, []).append(pid)
        if psid == sid:
            members.add(pid)
    if match:
        # The measuring process and its ancestors name `match` too (in their arguments):
        # they are not the run's.
        measurer, pid = set(), os.getpid()
        while pid in stats and pid not in measurer:
            measurer.add(pid)
            pid = stats[pid][0]
        for pid in stats:
            if pid in measurer:
                continue
            cmdline = _read(f"/proc/{pid}/cmdline", "rb")
            if cmdline and any(m.encode() in cmdline for m in match):
                members.add(pid)
    stack = list(members)
    while stack:
        for child in by_parent.get(stack.pop(), []):
            if child not in members:
                members.add(child)
                stack.append(child)
    return {pid: stats[pid][2] for pid in members}


class Sampler:
    """Samples a run's processes; call sample() every interval, then result()."""

    def __init__(self, root, sid, match=(), pids=(), breakdown=False):
        self.root, self.sid, self.match, self.pids = root, sid, list(match), list(pids)
        self.breakdown = breakdown
        self.peak_breakdown = []  # with breakdown: the peak sample's (pid, command, rollup)
        self.peak_pss = 0.0
        self.cpu = {}
        self.seen = set()
        self.start = time.monotonic()
        self.series = []  # (seconds since start, CPU seconds of the run so far)

    def sample(self):
        members = run_processes(self.root, self.sid, self.match, self.pids)
        total, rows = 0.0, []
        for pid, cpu in members.items():
            values = rollup(pid, BREAKDOWN if self.breakdown else ("Pss",)) or {}
            total += values.get("Pss", 0.0)
            if self.breakdown and values:
                rows.append((pid, command_of(pid), values))
            self.cpu[pid] = max(cpu, self.cpu.get(pid, 0.0))
            self.seen.add(pid)
        if total > self.peak_pss:
            self.peak_pss, self.peak_breakdown = total, rows
        self.series.append((round(time.monotonic() - self.start, 3),
                            round(sum(self.cpu.values()), 3)))
        return total

    def result(self):
        out = {"peak_pss_mib": round(self.peak_pss, 1), "cpu_s": round(sum(self.cpu.values()), 2),
               "processes": len(self.seen), "cpu_series": self.series}
        if self.breakdown:
            out["peak_breakdown"] = sorted(self.peak_breakdown)
        return out


def format_breakdown(rows):
    """run(breakdown=True)'s peak_breakdown as text: a line per process (pid, the
    BREAKDOWN fields in MiB, its command) and their total."""
    lines = [f"peak total {sum(v.get('Pss', 0) for _, _, v in rows):.0f} MiB "
             f"({' / '.join(BREAKDOWN)}, MiB, per process):"]
    for pid, name, values in rows:
        lines.append(f"  {pid:>7} " + " ".join(f"{values.get(k, 0):7.1f}" for k in BREAKDOWN)
                     + f"  {name}")
    lines.append("    total " + " ".join(f"{sum(v.get(k, 0) for _, _, v in rows):7.1f}"
                                       for k in BREAKDOWN))
    return "\n".join(lines)


def cpu_rate(series, start, end):
    """CPU seconds per second of the run between `start` and `end` (seconds since its
    start), from run()'s cpu_series; None if the series has no two samples in there."""
    inside = [(t, c) for t, c in series if start <= t <= end]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def run(command, env=None, cwd=None, match=(), pids=(), interval=0.5, timeout=3600,
        stdout=None, stderr=None, breakdown=False):
    """Runs `command` (a list) in a new session and returns {"rc", "wall_s",
    "peak_pss_mib", "cpu_s", "processes", "cpu_series", "output"} ("output": its stdout
    and stderr together, unless stdout/stderr say where they go; "cpu_series": the run's
    CPU seconds so far at each sample, for cpu_rate; with `breakdown`, "peak_breakdown" for
    format_breakdown). Kills the session after `timeout` seconds (rc -9)."""
    start = time.monotonic()
    capture = stdout is None
    proc = subprocess.Popen(command, env=env, cwd=cwd, start_new_session=True,
                            stdout=subprocess.PIPE if capture else stdout,
                            stderr=subprocess.STDOUT if capture else stderr)
    sampler = Sampler(proc.pid, proc.pid, match, pids, breakdown)
    chunks = []
    if capture:
        os.set_blocking(proc.stdout.fileno(), False)
    while True:
        sampler.sample()
        if capture:
            data = proc.stdout.read()
            if data:
                chunks.append(data)
        if proc.poll() is not None:
            break
        if time.monotonic() - start > timeout:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
            proc.wait()
            break
        time.sleep(interval)
    wall = time.monotonic() - start
    if capture:
        os.set_blocking(proc.stdout.fileno(), True)
        chunks.append(proc.stdout.read())
    # Whatever the command left behind in its session (a daemon it started) goes too.
    try:
        os.killpg(proc.pid, 15)
    except ProcessLookupError:
        pass
    out = {"rc": proc.returncode, "wall_s": round(wall, 2), **sampler.result()}
    if capture:
        out["output"] = b"".join(c for c in chunks if c).decode(errors="replace")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, action="append", default=[])
    parser.add_argument("--match", action="append", default=[])
    parser.add_argument("--breakdown", action="store_true",
                        help="print the peak sample's Pss per process on stderr")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    result = run(command, match=args.match, pids=args.pid, stdout=sys.stderr, stderr=sys.stderr,
                 breakdown=args.breakdown)
    result.pop("cpu_series")
    if args.breakdown:
        print("measure: " + format_breakdown(result.pop("peak_breakdown")), file=sys.stderr)
    print(json.dumps(result))
    return result["rc"]


if __name__ == "__main__":
    sys.exit(main())
