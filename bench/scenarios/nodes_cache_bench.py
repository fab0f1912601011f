"""Bytes each node fetches per epoch (issue 29: "each node should fetch mostly its own
shards"): two emberd daemons as two nodes on this machine (mutual TLS, node 0
coordinating, each with its own shard cache at least the set's size), one rank each
(ember.Loader, --epochs whole epochs), reading webdataset_bench's photo shards from a
loopback nginx with `shuffle: shards`, each node's cache at half the set and emptied
after registration (which fetches every shard to index it). Per node: the bytes its cache
fetched while its rank read (emberd logs its cache's counts at exit), per epoch, against
the set's size. With a step's samples grouped by shard before the ranks' cut,
each node reads about half the shards of each window; cut as they come, every node
reads every shard. Appends to results/shard_cache.md.

  bench/compare nodes_cache_bench [--shard-mib 2] [--window 4] [--epochs 2]
"""

import os
import re
import subprocess
import sys

from emberd import Emberd
from scenarios import commit, heading
from scenarios.images import PIPELINE
from scenarios.webdataset_bench import COUNT, Nginx, shards

NAME = "nodes_cache_bench"
BUILD = ["//daemon:emberd", "//tools/emberctl:emberctl", "//sdk/python:ember"]
NODES = 2
BATCH = 32

READER = r"""
import sys, ember
socket, rank, coordinator, epochs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
loader = ember.Loader("photos", %d, rank=rank, world_size=%d, job="nodes-cache",
                      client=ember.Client(socket), coordinator=coordinator, epochs=epochs,
                      seed=1)
count = sum(b["label"].shape[0] for _ in range(epochs) for b in loader)
print("rank", rank, "samples", count, flush=True)
""" % (BATCH, NODES)


def add_arguments(parser):
    parser.add_argument("--shard-mib", type=int, default=2)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)


def fetched(log_path):
    """The bytes the node's cache fetched (whole shards and ranges) in its last life, from
    the line emberd logs at exit."""
    with open(log_path, errors="replace") as f:
        found = re.findall(r"shard cache: \d+ hits, \d+ shards fetched \((\d+) bytes\), \d+ "
                           r"ranges read \((\d+) bytes\)", f.read())
    return int(found[-1][0]) + int(found[-1][1]) if found else 0


def run(ctx, args, shard_dir, set_bytes, epochs):
    certs = ctx.tmpdir("certs")
    lib = "source tools/lib/certs.sh"
    subprocess.run(["bash", "-c", f"{lib} && ember_make_ca {certs}"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    nginx = Nginx(ctx, shard_dir)
    daemons = []
    try:
        names = sorted(n for n in os.listdir(shard_dir) if n.endswith(".tar"))
        last = names[-1].split("-")[-1].split(".")[0]
        url = f"http://127.0.0.1:{nginx.port}/photos-{{000000..{last}}}.tar"
        registered = []
        for k in range(NODES):
            subprocess.run(["bash", "-c", f"{lib} && ember_make_node_cert {certs} node{k} "
                            "DNS:localhost,DNS:127.0.0.1,IP:127.0.0.1"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            directory = ctx.tmpdir(f"node{k}")
            config = os.path.join(directory, "emberd.yaml")
            with open(config, "w") as f:
                f.write(f"listen: 127.0.0.1:0\nnode: node{k}\ncache_limit: {set_bytes // 2}\n"
                        f"tls: {{cert: {certs}/node{k}.pem, key: {certs}/node{k}.key, "
                        f"ca: {certs}/ca.pem}}\n")
            daemon = Emberd(directory, "--config", config, log_level="info")
            daemons.append(daemon)
            daemon.ctl("dataset", "add", "photos", "--format", "webdataset", "--path", url,
                       "--pipeline", PIPELINE, "--shuffle", "shards", "--shuffle-window",
                       str(args.window), "--quiet")
            # An empty cache for the reading (the indexes' notes stay).
            daemon.close()
            cache = os.path.join(directory, "state", "shard-cache")
            for name in os.listdir(cache):
                if name.endswith((".shard", ".meta")):
                    os.remove(os.path.join(cache, name))
            daemons[-1] = Emberd(directory, "--config", config, log_level="info")
        with open(os.path.join(daemons[0].dir, "state", "peer.port")) as f:
            coordinator = f"127.0.0.1:{f.read().strip()}"
        env = {**os.environ, "PYTHONPATH": ctx.python_ember()}
        readers = [subprocess.Popen([sys.executable, "-c", READER, d.socket, str(k), coordinator,
                                     str(epochs)], env=env, stdout=subprocess.PIPE, text=True)
                   for k, d in enumerate(daemons)]
        outputs = [r.communicate(timeout=1800)[0] for r in readers]
        if any(r.returncode != 0 for r in readers):
            ctx.fail("nodes_cache readers", "\n".join(outputs))
    finally:
        for d in daemons:
            d.close()
        nginx.close()
    return [fetched(d.log_path) for d in daemons]


def main(ctx, args):
    ctx.build(BUILD)
    shard_dir = shards(ctx, args.shard_mib)
    names = [n for n in os.listdir(shard_dir) if n.endswith(".tar")]
    set_bytes = sum(os.path.getsize(os.path.join(shard_dir, n)) for n in names)
    per_node = run(ctx, args, shard_dir, set_bytes, args.epochs)
    ctx.log(f"bytes fetched while reading, per node: {per_node}")
    cells = " | ".join(f"{b / args.epochs / set_bytes:.2f}x" for b in per_node)
    text = heading(args.command) + (
        f"Commit {commit()}; {COUNT} photographs as {len(names)} shards of at most "
        f"{args.shard_mib} MiB ({set_bytes / 2**20:.1f} MiB in all), {NODES} nodes x 1 rank, "
        f"batch {BATCH}, shuffle: shards (window {args.window}), {args.epochs} epochs, each "
        "node's cache half the set, empty when the ranks start.\n\n"
        "| bytes fetched per epoch / set | " + " | ".join(f"node {k}" for k in range(NODES))
        + " |\n|---|" + "---|" * NODES + "\n| while reading | " + cells + " |\n")
    ctx.append("shard_cache.md", text)
    return 0
