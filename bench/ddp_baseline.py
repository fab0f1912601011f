#!/usr/bin/python3
"""PyTorch DDP baseline for bench/sync_bench: the same training step on synthetic data.

Starts R rank processes (spawn) that meet over a gloo process group (a FileStore in a
temporary directory, loopback interface) and wrap the model in
torch.nn.parallel.DistributedDataParallel with its defaults (25 MB buckets, buffers
broadcast before every forward). Every rank makes one fixed random batch (seeded by its
rank) once and trains on it again and again: zero_grad, forward, cross-entropy,
backward (DDP's all-reduces overlap it), optimizer step, with torch.set_num_threads(T).
The models are the ones of bench/sync_bench: the Fashion-MNIST example CNN
(sdk/examples/fashion_cnn.cc; imported from sdk/examples/python/fashion_cnn.py) and
ResNet-18 in its CIFAR form (bench/models/resnet18.h: torchvision's resnet18 with a 3x3
stride-1 stem and no max-pool). After W warm-up steps, S steps are timed on rank 0,
which prints, last:

  ddp_baseline: impl=torch_ddp model=<M> params=<N> ranks=<R> batch=<B> steps=<S>
    step_ms_mean=... step_ms_median=... forward_ms=... backward_ms=... sync_ms=0.00
    optimizer_ms=... cpu_ms=... page_faults=...

(one line; phases are means; cpu_ms and page_faults are rank 0's process CPU time, all
threads, and minor page faults per timed step). With --no-ddp every rank times the bare
model on its own (impl=torch_none). Runs with Debian's python3-torch (1.13) and
torchvision; needs no network.
"""

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

import json_lines  # bench/json_lines.py, beside this script
import rank_results  # bench/rank_results.py, beside this script

# The example CNN, the same module the Python example trains (also imported from here by
# python_ddp.py and the Ray baseline).
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                             "sdk", "examples", "python"))
from fashion_cnn import FashionCnn  # noqa: E402  sdk/examples/python/fashion_cnn.py

CLASSES = 10


def resnet18():
    """bench/models/resnet18.h: input [B, 3, 32, 32], logits [B, 10]."""
    import torchvision
    model = torchvision.models.resnet18(num_classes=CLASSES)
    model.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.maxpool = nn.Identity()
    return model


MODELS = {"cnn": (FashionCnn, (1, 28, 28)), "resnet18": (resnet18, (3, 32, 32))}


def process_usage():
    """CPU ms (user + system, all threads) and minor page faults of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return 1000 * (usage.ru_utime + usage.ru_stime), usage.ru_minflt


def run_rank(rank, args, store_path, results):
    try:
        torch.set_num_threads(args.threads)
        torch.manual_seed(args.seed + rank)
        make_model, sample_shape = MODELS[args.model]
        model = make_model()
        params = sum(p.numel() for p in model.parameters())
        x = torch.randn(args.batch_size, *sample_shape)
        y = torch.randint(CLASSES, (args.batch_size,), dtype=torch.int64)
        net = model
        if args.ddp:
            dist.init_process_group(
                "gloo", init_method=f"file://{store_path}", rank=rank, world_size=args.ranks)
            net = nn.parallel.DistributedDataParallel(model)
        if args.optimizer == "sgd":
            optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        else:
            optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

        phases = {"step": [], "forward": [], "backward": [], "optimizer": []}
        net.train()
        for step in range(args.warmup + args.steps):
            if step == args.warmup:
                usage_before = process_usage()
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = F.cross_entropy(net(x), y)
            forwarded = time.perf_counter()
            loss.backward()
            backwarded = time.perf_counter()
            optimizer.step()
            end = time.perf_counter()
            if step < args.warmup:
                continue
            phases["step"].append(1000 * (end - start))
            phases["forward"].append(1000 * (forwarded - start))
            phases["backward"].append(1000 * (backwarded - forwarded))
            phases["optimizer"].append(1000 * (end - backwarded))
        usage_after = process_usage()
        phases["cpu"] = [(usage_after[0] - usage_before[0]) / args.steps]
        phases["page_faults"] = [(usage_after[1] - usage_before[1]) / args.steps]
        if args.ddp:
            dist.barrier()  # the ranks leave together
            dist.destroy_process_group()
        results.put(("ok", rank, params, phases))
    except BaseException:  # reported to the parent, which fails the run
        results.put(("error", rank, traceback.format_exc()))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="cnn")
    parser.add_argument("--ranks", type=int, default=2, help="rank processes (default 2)")
    parser.add_argument("--batch-size", type=int, default=64, help="per rank (default 64)")
    parser.add_argument("--steps", type=int, default=50, help="timed steps (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads per rank (default 1)")
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam",
                        help="adam (default) or sgd with momentum 0.9")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0, help="rank r uses seed + r")
    parser.add_argument("--no-ddp", dest="ddp", action="store_false",
                        help="no process group and no DDP wrapper (each rank on its own)")
    parser.add_argument("--json", metavar="FILE",
                        help="also append the result as one JSON line to FILE "
                             "(e.g. bench/results/sync_cpu.jsonl)")
    args = parser.parse_args(argv)
    if min(args.ranks, args.batch_size, args.steps, args.threads) < 1 or args.warmup < 0:
        parser.error("--ranks, --batch-size, --steps and --threads must be >= 1, --warmup >= 0")
    return args


def main(argv):
    args = parse_args(argv)
    load_before = os.getloadavg()[0]  # other work on the machine skews the figures
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # as Ember's Gloo: loopback only
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="ddp-baseline.") as tmp:
        store_path = os.path.join(tmp, "store")
        procs = [ctx.Process(target=run_rank, args=(r, args, store_path, results))
                 for r in range(args.ranks)]
        for p in procs:
            p.start()
        per_rank, failure = rank_results.gather(results, procs)
    if failure is not None:
        print(f"ddp_baseline: error: {failure}", file=sys.stderr)
        return 1

    params, phases = per_rank[0]
    mean = {name: statistics.mean(values) for name, values in phases.items()}
    record = {
        "impl": "torch_ddp" if args.ddp else "torch_none",
        "model": args.model,
        "params": params,
        "ranks": args.ranks,
        "batch": args.batch_size,
        "steps": args.steps,
        "step_ms_mean": round(mean["step"], 2),
        "step_ms_median": round(statistics.median(phases["step"]), 2),
        "forward_ms": round(mean["forward"], 2),
        "backward_ms": round(mean["backward"], 2),
        "sync_ms": 0.0,
        "optimizer_ms": round(mean["optimizer"], 2),
        "cpu_ms": round(mean["cpu"], 1),
        "page_faults": round(mean["page_faults"]),
    }
    if args.json:
        json_lines.append(args.json, "ddp_baseline", load_before, {
            **record,
            "warmup": args.warmup,
            "threads": args.threads,
            "optimizer": args.optimizer,
        })
    print("ddp_baseline: " + " ".join(
        f"{k}={v:.1f}" if k == "cpu_ms" else f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
        for k, v in record.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
