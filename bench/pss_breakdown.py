#!/usr/bin/python3
"""Where a run's memory goes: runs a command, samples every 0.5 s the PSS of its process
tree (plus --pid PIDs, e.g. emberd) from /proc/<pid>/smaps_rollup, and at the end prints
the sample with the largest total, one line per process: its command, Pss and Pss split
into anonymous, file-backed and shared-memory pages (MiB), and the total.

  bench/pss_breakdown.py [--pid PID]... -- COMMAND...

Exits with the command's status.
"""

import argparse
import subprocess
import sys
import time

FIELDS = ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem")


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def tree(pid):
    pids = [pid]
    for child in children(pid):
        pids += tree(child)
    return pids


def rollup(pid):
    values = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in FIELDS:
                    values[key] = int(rest.split()[0]) / 1024
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    name = " ".join(a.decode(errors="replace") for a in argv[:4] if a)
    return name[:70], values


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    proc = subprocess.Popen(command)
    peak, peak_total = [], 0.0
    while proc.poll() is None:
        sample = [(pid, r) for pid in tree(proc.pid) + args.pid if (r := rollup(pid))]
        total = sum(r[1].get("Pss", 0) for _, r in sample)
        if total > peak_total:
            peak, peak_total = sample, total
        time.sleep(0.5)
    print(f"pss_breakdown: peak total {peak_total:.0f} MiB "
          f"({' / '.join(FIELDS)}, MiB, per process):", file=sys.stderr)
    for pid, (name, values) in peak:
        print(f"  {pid:>7} " + " ".join(f"{values.get(k, 0):7.1f}" for k in FIELDS) + f"  {name}",
              file=sys.stderr)
    sums = [sum(r[1].get(k, 0) for _, r in peak) for k in FIELDS]
    print("    total " + " ".join(f"{v:7.1f}" for v in sums), file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
