"""Data read where it lives (issue 29's benchmark, remote part): --count photographs
(bench/make_photo_folder.py) as WebDataset shards of --shard-mib (webdataset's ShardWriter)
and as a Mosaic MDS set of the same JPEG bytes (MDSWriter), on loopback servers: Debian's
nginx (HTTP) and a one-node Ceph radosgw (S3, tools/ceph-s3). 2 ranks, the imagenet
pipeline (Ember) or its torchvision equivalent (the baselines), interleaved in each round:
  packed     the folder packed, local (emberctl pack): the reference
  tar        the local shards (webdataset)
  s3-cold    the shards from S3 through an empty node cache (the indexes noted at
             registration kept): the first epoch fetches every shard
  s3-warm    the same after the cache holds the set
  http-warm  the shards from nginx, the cache holding the set
  mosaic-s3  Mosaic Streaming's StreamingDataset on the MDS set in the same S3 server,
             torch's DataLoader with --workers per rank (bench/stream_readers.py)
  wds-http   webdataset's WebDataset on the shards' nginx URLs, torch's DataLoader with
             --workers per rank (bench/stream_readers.py)
Ember's systems read one whole epoch (bench/loader_bench --epochs 1: images/s = the
epoch's samples over the slowest reader's time); the baselines read --seconds after a
second of warm-up. Peak PSS over every process of the run (emberd, radosgw and nginx not
counted: they serve all systems alike). Appends to results/remote.md.

  bench/compare remote_bench [--rounds 2] [--count 20000] [--shard-mib 64] [--seconds 10]
                             [--workers 1]
"""

import os
import re
import shutil
import statistics
import subprocess

import measure
from emberd import Emberd
from scenarios import commit, heading, load1
from scenarios.images import PIPELINE
from scenarios.webdataset_bench import WRITER, Nginx

NAME = "remote_bench"
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//bench:loader_bench"]
SYSTEMS = ("packed", "tar", "s3-cold", "s3-warm", "http-warm", "mosaic-s3", "wds-http")
RANKS = 2
BATCH = 64
BUCKET = "photos"

MDS_WRITER = r"""
import os, sys
from streaming import MDSWriter
root, out, max_mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
with MDSWriter(out=out, columns={"jpeg": "bytes", "label": "int"}, compression=None,
               size_limit=max_mib << 20) as sink:
    for label, name in enumerate(classes):
        for dirpath, _, files in sorted(os.walk(os.path.join(root, name))):
            for f in sorted(files):
                if f.lower().endswith((".jpg", ".jpeg", ".png")):
                    with open(os.path.join(dirpath, f), "rb") as image:
                        sink.write({"jpeg": image.read(), "label": label})
"""


def add_arguments(parser):
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--shard-mib", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=1,
                        help="the baselines' DataLoader workers per rank")


def writers_python():
    return subprocess.run(["./tools/install-deps", "--writers-python"], capture_output=True,
                          text=True, check=True).stdout.strip()


def made(path, make):
    """`path`, made by make(tmp) once (kept in the bench cache)."""
    if not os.path.exists(path):
        if os.path.exists(path + ".tmp"):
            shutil.rmtree(path + ".tmp")
        make(path + ".tmp")
        os.rename(path + ".tmp", path)
    return path


def data(ctx, args):
    base = os.path.join(ctx.cache, f"photos-{args.count}")
    photos = made(base, lambda out: subprocess.run(
        ["/usr/bin/python3", "bench/make_photo_folder.py", out, "--count", str(args.count)],
        check=True, stdout=subprocess.DEVNULL))
    packed = made(base + ".packed", lambda out: subprocess.run(
        ["bazel-bin/tools/emberctl/emberctl", "pack", photos, out, "--quiet"], check=True))
    shards = made(f"{base}.wds-{args.shard_mib}", lambda out: subprocess.run(
        [writers_python(), "-c", WRITER, photos, out, str(args.shard_mib)], check=True))
    mds = made(f"{base}.mds-{args.shard_mib}", lambda out: subprocess.run(
        [writers_python(), "-c", MDS_WRITER, photos, out, str(args.shard_mib)], check=True))
    return packed, shards, mds


class CephS3:
    """tools/ceph-s3: a one-node Ceph with radosgw on loopback, for the whole benchmark."""

    def __init__(self, ctx):
        self.dir = os.path.join(ctx.tmpdir("ceph"), "s3")
        out = subprocess.run(["tools/ceph-s3", "start", self.dir, "--watch-pid", str(os.getpid())],
                             check=True, capture_output=True, text=True).stdout
        self.env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        self.env["AWS_ENDPOINT_URL_S3"] = self.env["EMBER_S3_ENDPOINT"]

    def put(self, local, prefix):
        subprocess.run(["tools/ceph-s3", "put", self.dir, BUCKET, local, prefix], check=True,
                       stdout=subprocess.DEVNULL)

    def close(self):
        subprocess.run(["tools/ceph-s3", "stop", self.dir], check=False)


def pattern(names, prefix):
    last = sorted(names)[-1].split("-")[-1].split(".")[0]
    return f"{prefix}photos-{{000000..{last}}}.tar"


def ember_run(ctx, args, system, packed, shards, s3, nginx):
    env = {**os.environ, **s3.env}
    daemon = Emberd(ctx.tmpdir("emberd"), env=env)
    try:
        names = [n for n in os.listdir(shards) if n.endswith(".tar")]
        if system == "packed":
            fmt, path = "packed", packed
        elif system == "tar":
            fmt, path = "webdataset", shards
        elif system.startswith("s3"):
            fmt, path = "webdataset", pattern(names, f"s3://{BUCKET}/wds/")
        else:
            fmt, path = "webdataset", pattern(names, f"http://127.0.0.1:{nginx.port}/")
        daemon.ctl("dataset", "add", "images", "--format", fmt, "--path", path,
                   "--pipeline", PIPELINE)
        if system == "s3-cold":
            # Registration fetched every shard to index it: an empty cache again (the
            # indexes' notes stay, as after a first registration on another day).
            daemon.close()
            cache = os.path.join(daemon.dir, "state", "shard-cache")
            for name in os.listdir(cache):
                if name.endswith((".shard", ".meta")):
                    os.remove(os.path.join(cache, name))
            daemon = Emberd(daemon.dir, env=env)
        measured = measure.run(["bazel-bin/bench/loader_bench", "--socket", daemon.socket,
                                "images", "--ranks", str(RANKS), "--batch-size", str(BATCH),
                                "--epochs", "1"], pids=[daemon.pid], timeout=1800)
    finally:
        daemon.close()
    out = measured.pop("output")
    readers = [(int(n), float(s)) for n, s in
               re.findall(r"reader \d+: (\d+) samples in ([0-9.]+) s", out)]
    if measured["rc"] != 0 or len(readers) != RANKS:
        ctx.fail(f"remote {system}", out)
    rate = sum(n for n, _ in readers) / max(s for _, s in readers)
    return {"system": system, "images_per_s": rate, "peak_pss_mib": measured["peak_pss_mib"]}


def baseline_run(ctx, args, system, mds, shards, s3, nginx):
    names = [n for n in os.listdir(shards) if n.endswith(".tar")]
    flags = ["--ranks", str(RANKS), "--batch", str(BATCH), "--seconds", str(args.seconds),
             "--workers", str(args.workers)]
    env = {**os.environ}
    if system == "mosaic-s3":
        env.update(s3.env)
        env["S3_ENDPOINT_URL"] = s3.env["EMBER_S3_ENDPOINT"]
        flags += ["--system", "mosaic", "--remote", f"s3://{BUCKET}/mds",
                  "--local", ctx.tmpdir("mosaic-cache")]
    else:
        flags += ["--system", "wds", "--urls",
                  pattern(names, f"http://127.0.0.1:{nginx.port}/")]
    measured = measure.run([ctx.venv_python(), "bench/stream_readers.py", *flags], env=env,
                           timeout=1800)
    out = measured.pop("output")
    rates = [float(x) for x in re.findall(r"bench: samples_per_s=([0-9.]+)", out)]
    if measured["rc"] != 0 or len(rates) != 1:
        ctx.fail(f"remote {system}", out)
    return {"system": system, "images_per_s": rates[0], "peak_pss_mib": measured["peak_pss_mib"]}


def main(ctx, args):
    ctx.build(BUILD)
    ctx.venv_python()
    packed, shards, mds = data(ctx, args)
    set_bytes = sum(os.path.getsize(os.path.join(shards, n)) for n in os.listdir(shards))
    s3 = CephS3(ctx)
    nginx = Nginx(ctx, shards)
    try:
        s3.put(shards, "wds")
        s3.put(mds, "mds")
        runs = {s: [] for s in SYSTEMS}
        loads = []
        for round_ in range(args.rounds):
            for k in range(len(SYSTEMS)):
                system = SYSTEMS[(k + round_) % len(SYSTEMS)]
                loads.append(f"{load1():.2f}")
                if system in ("mosaic-s3", "wds-http"):
                    record = baseline_run(ctx, args, system, mds, shards, s3, nginx)
                else:
                    record = ember_run(ctx, args, system, packed, shards, s3, nginx)
                ctx.log(f"round {round_ + 1}: {record}")
                runs[system].append(record)
    finally:
        nginx.close()
        s3.close()
    rows = []
    for system in SYSTEMS:
        records = runs[system]
        rate = statistics.median(r["images_per_s"] for r in records)
        ratio = statistics.median(r["images_per_s"] / p["images_per_s"]
                                  for r, p in zip(records, runs["packed"]))
        pss = statistics.median(r["peak_pss_mib"] for r in records)
        rows.append(f"| {system} | {rate:,.0f} | {ratio:.3f}x | {pss:,.0f} |")
    shard_count = len([n for n in os.listdir(shards) if n.endswith(".tar")])
    text = heading(args.command) + (
        f"Commit {commit()}; {args.count} photographs as {shard_count} WebDataset shards of at "
        f"most {args.shard_mib} MiB ({set_bytes / 2**20:.0f} MiB in all) and the same JPEG "
        f"bytes as an MDS set, {RANKS} ranks, batch {BATCH}, imagenet pipeline; Ember: one "
        f"epoch per run, baselines: {args.seconds:g} s after warm-up, {args.workers} "
        f"DataLoader worker(s) per rank; {args.rounds} rounds interleaved; 1-minute load "
        f"before each run: {' '.join(loads)}. Medians over the rounds; the ratio is the "
        "median of each round's ratio to packed.\n\n"
        "| system | images/s | vs packed | peak PSS MiB |\n|---|---|---|---|\n"
        + "\n".join(rows) + "\n")
    ctx.append("remote.md", text)
    return 0
