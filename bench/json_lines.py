"""The --json output of the Python baselines: one JSON object per line appended to a file,
starting as the C++ benchmarks' lines do (bench/json_lines.h) with the tool, the local time
and the host, then the machine's CPUs, its load before the run and the torch version.
"""

import json
import os
import platform
import time

import torch


def append(path, tool, load_before, fields):
    """Appends {"tool": tool, "time", "host", "cpus", "loadavg_1min_before": load_before,
    "torch", **fields} as one line to the file `path`."""
    record = {
        "tool": tool,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "loadavg_1min_before": round(load_before, 2),
        "torch": torch.__version__,
        **fields,
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
