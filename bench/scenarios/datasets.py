"""datasets: packed and token datasets of 10k, 100k and 1M samples, each on a fresh
emberd (bench/datasets_scale.py, which documents every figure): registration time,
emberd's RSS and PSS after registration and at the first batch, time to the first batch,
per-sample cost, and the file-system syscalls emberd makes in the second epoch (no
directory walk per epoch: it must stay 0 or flat in N)."""

import json
import os
import re

import measure
from scenarios import Run, by_key, figure, save_figure

NAME = "datasets"
TITLE = "Datasets: 10k, 100k and 1M samples"
FORMATS = ("packed", "tokens")
SIZES = (10_000, 100_000, 1_000_000)
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//bench:loader_bench"]


def prepare(ctx):
    ctx.build(BUILD)


def _one(ctx, fmt, n):
    measured = measure.run(["/usr/bin/python3", "bench/datasets_scale.py", "--sizes", str(n),
                            "--formats", fmt, "--seconds", str(min(ctx.seconds, 5)), "--keep",
                            os.path.join(ctx.cache, "datasets")], timeout=3600)
    out = measured.pop("output")
    found = re.findall(r"^result: (\{.*\})$", out, re.M)
    if measured["rc"] != 0 or len(found) != 1:
        ctx.fail(f"datasets {fmt} {n}", out)
    record = json.loads(found[0])
    record.pop("scenario", None)
    return record


def runs(ctx):
    return [Run("ember", f"{fmt} N={n:,}", lambda ctx, f=fmt, n=n: _one(ctx, f, n))
            for fmt in FORMATS for n in SIZES]


def _representative(records):
    """Per case, the round whose samples/s is the median."""
    out = []
    for (case, _), rounds in sorted(by_key(records).items(),
                                    key=lambda kv: (kv[0][0].split()[0], kv[1][1]["samples"])):
        ordered = sorted(rounds.values(), key=lambda r: r["samples_per_s"])
        out.append(ordered[len(ordered) // 2])
    return out


def report(records):
    import datasets_scale  # bench/datasets_scale.py
    return datasets_scale.table(_representative(records))


def summary(records):
    """One row per size: per format, registration s, emberd RSS MiB at the first batch,
    first batch s, us per sample; and the file-system syscalls of the second epoch."""
    by_size = {}
    for r in _representative(records):
        by_size.setdefault(r["samples"], {})[r["format"]] = r
    lines = ["| samples | packed: register s, RSS MiB, 1st batch s, us/sample | tokens: the same "
             "| fs syscalls in epoch 2 |", "|---:|---|---|---:|"]
    for n, formats in sorted(by_size.items()):
        cells = [(f"{r['register_s']:.3f}, {r['emberd_mib']['first_batch']['rss']:.0f}, "
                  f"{r['first_batch_s']:.3f}, {r['ns_per_sample'] / 1000:.1f}")
                 if (r := formats.get(f)) else "" for f in FORMATS]
        calls = sum(r.get("syscalls_epoch1_total") or 0 for r in formats.values())
        lines.append(f"| {n:,} | {cells[0]} | {cells[1]} | {calls} |")
    return "\n".join(lines)


def plot(records, path):
    reps = _representative(records)
    fig, axes = figure(3, (13, 3.6))
    for fmt, color in (("packed", "tab:orange"), ("tokens", "tab:blue")):
        rs = sorted((r for r in reps if r["format"] == fmt), key=lambda r: r["samples"])
        xs = [r["samples"] for r in rs]
        axes[0].plot(xs, [r["register_s"] for r in rs], "o-", color=color, label=fmt)
        axes[1].plot(xs, [r["emberd_mib"]["first_batch"]["rss"] for r in rs], "o-", color=color,
                     label=fmt)
        axes[2].plot(xs, [r["ns_per_sample"] for r in rs], "o-", color=color, label=fmt)
    for ax, title in zip(axes, ("registration, s", "emberd RSS at the first batch, MiB",
                                "ns per sample")):
        ax.set(title=title, xscale="log", xlabel="samples")
        ax.legend()
    save_figure(fig, TITLE, path)
