"""Collecting the results of benchmark ranks run as multiprocessing processes.

Each rank puts ("ok", rank, *values) on a shared queue when done, or ("error", rank,
traceback text) when it fails (bench/dataloader_baseline.py, bench/ddp_baseline.py).
"""

import queue
import time


def gather(results, procs, timeout_s=None):
    """Waits for one "ok" message per process in `procs` on the queue `results`.

    Returns ({rank: tuple of its values}, None), or (what it has, failure text) at the
    first "error" message, a process that exited non-zero, or after timeout_s seconds
    (None: no limit). On failure the processes still running are terminated; every
    process is joined (up to 60 s each) before returning.
    """
    per_rank = {}
    failure = None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while len(per_rank) < len(procs) and failure is None:
        try:
            msg = results.get(timeout=1.0)
        except queue.Empty:
            if deadline is not None and time.monotonic() > deadline:
                failure = "timed out waiting for the ranks"
            elif any(p.exitcode not in (None, 0) for p in procs):
                failure = "a rank exited with " + ", ".join(
                    f"rank {r}: {p.exitcode}" for r, p in enumerate(procs)
                    if p.exitcode not in (None, 0))
            continue
        if msg[0] == "error":
            failure = f"rank {msg[1]} failed:\n{msg[2]}"
        else:
            per_rank[msg[1]] = tuple(msg[2:])
    for p in procs:
        if failure is not None and p.is_alive():
            p.terminate()
        p.join(timeout=60)
    return per_rank, failure
