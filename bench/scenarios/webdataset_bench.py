"""WebDataset shards read in place (issue 29's benchmark, first part): the photo folder of
the images scenario (2,000 photographs, bench/make_photo_folder.py) as WebDataset shards
written by webdataset's own ShardWriter (--shard-mib each; the writers' venv of
tools/install-deps), 2 ranks of bench/loader_bench, the imagenet pipeline, one emberd per
run. Systems, interleaved in each round:
  packed       the folder packed (emberctl pack): the reference
  folder       the folder itself (imagefolder)
  tar          the local shards (webdataset)
  http-full    the shards from a loopback nginx through the shard cache, cache_limit the
               set's size (registration fills it: reads hit the cache)
  http-half    the same with cache_limit half the set's size: shards are evicted and
               fetched again as the readers go round
Per run: images/s after warm-up and its ratio to packed's of the same round; for HTTP,
the bytes nginx sent while the readers ran (its access log) per epoch they read in the
measured window, against the set's size (an upper bound: the warm-up's fetches count, its
samples do not); peak PSS of emberd and the readers. Appends to results/webdataset.md.

  bench/compare webdataset_bench [--rounds 3] [--seconds 8] [--shard-mib 16]
"""

import os
import re
import socket
import statistics
import subprocess
import time

import measure
from emberd import Emberd
from scenarios import commit, heading, load1
from scenarios.images import PIPELINE, folder, packed

NAME = "webdataset_bench"
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//bench:loader_bench"]
SYSTEMS = ("packed", "folder", "tar", "http-full", "http-half")
COUNT = 2000
RANKS = 2
BATCH = 64

WRITER = r"""
import os, sys
import webdataset as wds
root, out, max_mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
os.makedirs(out)
with wds.ShardWriter(os.path.join(out, "photos-%06d.tar"), maxsize=max_mib << 20,
                     maxcount=10**9, verbose=0) as sink:
    for label, name in enumerate(classes):
        for dirpath, _, files in sorted(os.walk(os.path.join(root, name))):
            for f in sorted(files):
                if f.lower().endswith((".jpg", ".jpeg", ".png")):
                    with open(os.path.join(dirpath, f), "rb") as image:
                        sink.write({"__key__": "%s/%s" % (name, f.rsplit(".", 1)[0]),
                                    "jpg": image.read(), "cls": label})
"""


def add_arguments(parser):
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8)
    # The 2,000 photographs are ~60 MiB: 16 MiB shards make a few, so that the half-size
    # cache has something to evict.
    parser.add_argument("--shard-mib", type=int, default=16)


def shards(ctx, mib):
    """The photo folder as shards of at most `mib` MiB (made once, cached)."""
    path = os.path.join(ctx.cache, f"photos-{COUNT}.wds-{mib}")
    if not os.path.isdir(path):
        python = subprocess.run(["./tools/install-deps", "--writers-python"], capture_output=True,
                                text=True, check=True).stdout.strip()
        subprocess.run([python, "-c", WRITER, folder(ctx, "photos"), path + ".tmp", str(mib)],
                       check=True)
        os.rename(path + ".tmp", path)
    return path


class Nginx:
    """Debian's nginx serving `root` on a free loopback port, logging the bytes it sends."""

    def __init__(self, ctx, root):
        self.dir = ctx.tmpdir("nginx")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        user = "user root root;\n" if os.geteuid() == 0 else ""
        temp = "".join(f"  {k}_temp_path {self.dir}/{k};\n"
                       for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        self.access_log = os.path.join(self.dir, "access.log")
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"{user}daemon off;\nmaster_process off;\npid {self.dir}/nginx.pid;\n"
                    f"error_log {self.dir}/error.log warn;\nevents {{}}\n"
                    f"http {{\n  log_format sent '$bytes_sent';\n"
                    f"  access_log {self.access_log} sent;\n{temp}"
                    f"  server {{ listen 127.0.0.1:{self.port}; root {root}; }}\n}}\n")
        self.proc = subprocess.Popen(["/usr/sbin/nginx", "-q", "-e", f"{self.dir}/error.log",
                                      "-p", self.dir, "-c", conf])
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.02)
        self.close()
        raise RuntimeError(f"nginx did not start: {self.dir}/error.log")

    def bytes_sent(self):
        try:
            with open(self.access_log) as f:
                return sum(int(line) for line in f if line.strip().isdigit())
        except OSError:
            return 0

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def one_run(ctx, args, system, shard_dir, set_bytes):
    flags = []
    config = None
    if system.startswith("http"):
        limit = set_bytes + (1 << 20) if system == "http-full" else set_bytes // 2
        config = os.path.join(ctx.tmpdir("config"), "emberd.yaml")
        with open(config, "w") as f:
            f.write(f"cache_limit: {limit}\n")
        flags = ["--config", config]
    daemon = Emberd(ctx.tmpdir("emberd"), *flags)
    nginx = Nginx(ctx, shard_dir) if system.startswith("http") else None
    try:
        names = sorted(n for n in os.listdir(shard_dir) if n.endswith(".tar"))
        if system == "packed":
            fmt, path = "packed", packed(ctx, "photos")
        elif system == "folder":
            fmt, path = "imagefolder", folder(ctx, "photos")
        elif system == "tar":
            fmt, path = "webdataset", shard_dir
        else:
            last = names[-1].split("-")[-1].split(".")[0]
            fmt = "webdataset"
            path = f"http://127.0.0.1:{nginx.port}/photos-{{000000..{last}}}.tar"
        daemon.ctl("dataset", "add", "images", "--format", fmt, "--path", path,
                   "--pipeline", PIPELINE)
        sent_before = nginx.bytes_sent() if nginx else 0
        measured = measure.run(["bazel-bin/bench/loader_bench", "--socket", daemon.socket,
                                "images", "--ranks", str(RANKS), "--batch-size", str(BATCH),
                                "--seconds", str(args.seconds)], pids=[daemon.pid], timeout=600)
        sent = (nginx.bytes_sent() - sent_before) if nginx else None
    finally:
        if nginx:
            nginx.close()
        daemon.close()
    out = measured.pop("output")
    rates = [float(x) for x in re.findall(r"bench: samples_per_s=([0-9.]+)", out)]
    if measured["rc"] != 0 or len(rates) != 1:
        ctx.fail(f"webdataset {system}", out)
    record = {"system": system, "images_per_s": rates[0], "peak_pss_mib": measured["peak_pss_mib"],
              "wall_s": measured["wall_s"]}
    if sent is not None:
        samples = sum(int(x) for x in re.findall(r"reader \d+: (\d+) samples in", out))
        epochs = samples / COUNT if samples else None
        record["sent_bytes"] = sent
        record["sent_per_epoch_vs_set"] = (sent / epochs / set_bytes) if epochs else None
    return record


def main(ctx, args):
    ctx.build(BUILD)
    packed(ctx, "photos")
    shard_dir = shards(ctx, args.shard_mib)
    set_bytes = sum(os.path.getsize(os.path.join(shard_dir, n)) for n in os.listdir(shard_dir))
    runs = {s: [] for s in SYSTEMS}
    loads = []
    for round_ in range(args.rounds):
        for k in range(len(SYSTEMS)):
            system = SYSTEMS[(k + round_) % len(SYSTEMS)]
            loads.append(f"{load1():.2f}")
            record = one_run(ctx, args, system, shard_dir, set_bytes)
            ctx.log(f"round {round_ + 1}: {record}")
            runs[system].append(record)
    rows = []
    for system in SYSTEMS:
        records = runs[system]
        rate = statistics.median(r["images_per_s"] for r in records)
        ratio = statistics.median(r["images_per_s"] / p["images_per_s"]
                                  for r, p in zip(records, runs["packed"]))
        pss = statistics.median(r["peak_pss_mib"] for r in records)
        sent = [r["sent_per_epoch_vs_set"] for r in records if r.get("sent_per_epoch_vs_set")]
        sent_text = f"{statistics.median(sent):.2f}x" if sent else ""
        rows.append(f"| {system} | {rate:,.0f} | {ratio:.3f}x | {pss:,.0f} | {sent_text} |")
    shard_count = len([n for n in os.listdir(shard_dir) if n.endswith(".tar")])
    text = heading(args.command) + (
        f"Commit {commit()}; {COUNT} photographs as {shard_count} shards of at most "
        f"{args.shard_mib} MiB ({set_bytes / 2**20:.0f} MiB in all), {RANKS} ranks, batch {BATCH}, "
        f"{PIPELINE}, {args.seconds:g} s measured per run, {args.rounds} rounds interleaved; "
        f"1-minute load before each run: {' '.join(loads)}. Medians over the rounds; the ratio "
        "is the median of each round's ratio to packed.\n\n"
        "| system | images/s | vs packed | peak PSS MiB | HTTP bytes sent per epoch / set |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    ctx.append("webdataset.md", text)
    return 0
