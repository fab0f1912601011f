"""Bytes fetched per epoch by the node's shard cache (issue 29's benchmark, cache part):
the photo folder as WebDataset shards of --shard-mib each (webdataset_bench's), served by
a loopback nginx, read over HTTP through the shard cache by 2 ranks of bench/loader_bench
for whole epochs. Cases (one emberd and an empty cache each):
  belady-shards-half  shuffle: shards (window --window), cache_limit half the set, the
                      default eviction (the shard needed farthest in the future goes)
  lru-shards-half     the same with cache_eviction: lru
  belady-samples-half shuffle over all samples (the default), cache half the set
  lru-samples-half    the same with lru
  belady-shards-full  shuffle: shards, cache_limit the set's size
Each case runs twice: 1 epoch, then --epochs epochs, of the same job (the same seed: the
same first epoch), so the later epochs' bytes are the difference: bytes nginx sent per
later epoch, against the set's size. Registration (which indexes every shard, fetching
it) is not counted. Appends to results/shard_cache.md.

  bench/compare shard_cache_bench [--shard-mib 2] [--window 2] [--epochs 4]
      [--prefetch-steps 64] [--cases belady-shards-half,...]
"""

import os
import re

import measure
from emberd import Emberd
from scenarios import commit, heading
from scenarios.images import PIPELINE
from scenarios.webdataset_bench import COUNT, RANKS, Nginx, shards

NAME = "shard_cache_bench"
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//bench:loader_bench"]
CASES = ("belady-shards-half", "lru-shards-half", "belady-samples-half", "lru-samples-half",
         "belady-shards-full")
BATCH = 32


def add_arguments(parser):
    parser.add_argument("--shard-mib", type=int, default=2)
    parser.add_argument("--window", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--prefetch-steps", type=int, default=64,
                        help="emberd's cache_prefetch_steps")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases")


def one_run(ctx, args, case, shard_dir, set_bytes, epochs):
    policy, shuffle, size = case.split("-")
    limit = set_bytes // 2 if size == "half" else set_bytes + (1 << 20)
    config = os.path.join(ctx.tmpdir("config"), "emberd.yaml")
    with open(config, "w") as f:
        f.write(f"cache_limit: {limit}\ncache_eviction: {'lru' if policy == 'lru' else 'belady'}\n"
                f"cache_prefetch_steps: {args.prefetch_steps}\n")
    daemon = Emberd(ctx.tmpdir("emberd"), "--config", config)
    nginx = Nginx(ctx, shard_dir)
    try:
        names = sorted(n for n in os.listdir(shard_dir) if n.endswith(".tar"))
        last = names[-1].split("-")[-1].split(".")[0]
        path = f"http://127.0.0.1:{nginx.port}/photos-{{000000..{last}}}.tar"
        daemon.ctl("dataset", "add", "images", "--format", "webdataset", "--path", path,
                   "--pipeline", PIPELINE, "--shuffle", shuffle,
                   "--shuffle-window", str(args.window))
        before = nginx.bytes_sent()
        measured = measure.run(["bazel-bin/bench/loader_bench", "--socket", daemon.socket,
                                "images", "--ranks", str(RANKS), "--batch-size", str(BATCH),
                                "--epochs", str(epochs)], pids=[daemon.pid], timeout=900)
        sent = nginx.bytes_sent() - before
    finally:
        nginx.close()
        daemon.close()
    out = measured.pop("output")
    samples = sum(int(x) for x in re.findall(r"reader \d+: (\d+) samples in", out))
    if measured["rc"] != 0 or samples != epochs * COUNT:
        ctx.fail(f"shard_cache {case} {epochs} epochs ({samples} samples)", out)
    return sent


def main(ctx, args):
    ctx.build(BUILD)
    shard_dir = shards(ctx, args.shard_mib)
    names = [n for n in os.listdir(shard_dir) if n.endswith(".tar")]
    set_bytes = sum(os.path.getsize(os.path.join(shard_dir, n)) for n in names)
    rows = []
    for case in args.cases.split(","):
        first = one_run(ctx, args, case, shard_dir, set_bytes, 1)
        many = one_run(ctx, args, case, shard_dir, set_bytes, args.epochs)
        later = (many - first) / (args.epochs - 1)
        ctx.log(f"{case}: first epoch {first} B, {args.epochs} epochs {many} B")
        rows.append(f"| {case} | {first / set_bytes:.2f}x | {later / set_bytes:.2f}x |")
    text = heading(args.command) + (
        f"Commit {commit()}; {COUNT} photographs as {len(names)} shards of at most "
        f"{args.shard_mib} MiB ({set_bytes / 2**20:.1f} MiB in all), {RANKS} ranks, batch "
        f"{BATCH}, shuffle window {args.window} shards, {args.epochs} epochs, "
        f"cache_prefetch_steps {args.prefetch_steps}; HTTP bytes sent "
        "by nginx after registration, against the set's size.\n\n"
        "| case | epoch 1 (after registration) | each later epoch |\n|---|---|---|\n"
        + "\n".join(rows) + "\n")
    ctx.append("shard_cache.md", text)
    return 0
