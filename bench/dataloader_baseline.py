#!/usr/bin/python3
"""PyTorch DataLoader baseline for `bench/loader_bench`, on the same Fashion-MNIST data.

Starts R rank processes (spawn). Each builds a DataLoader over the training split with a
DistributedSampler(num_replicas=R, rank=r, shuffle=True), num_workers W and persistent
workers, and pulls batches as fast as it can (with --touch reading every byte of each
batch once, as `loader_bench --touch` does): 1 s of warm-up, then all ranks start
measuring together and pull for S seconds, moving to the next epoch when one ends.
Prints per-rank figures and, last:

  baseline: samples_per_s=<float> ranks=<R> batch=<B> workers=<W>

samples_per_s is the sum over ranks of samples / measured seconds.
Runs with Debian's python3-torch (1.13) and numpy; needs no network.
"""

import argparse
import gzip
import os
import struct
import sys
import time
import traceback

import numpy as np
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import json_lines  # bench/json_lines.py, beside this script
import rank_results  # bench/rank_results.py, beside this script

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
WARMUP_SECONDS = 1.0


def read_idx(path):
    """Reads an IDX file (gzip-compressed when it ends in .gz) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4:
        raise ValueError(f"{path}: truncated IDX header ({len(data)} bytes)")
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code not in IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (magic {data[:4].hex()})")
    header_size = 4 + 4 * ndim
    if len(data) < header_size:
        raise ValueError(f"{path}: truncated IDX header for {ndim} dimensions")
    shape = struct.unpack(f">{ndim}I", data[4:header_size])
    dtype = np.dtype(IDX_DTYPES[dtype_code])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header_size != expected:
        raise ValueError(
            f"{path}: expected {expected} payload bytes for shape {shape}, "
            f"got {len(data) - header_size}")
    return np.frombuffer(data, dtype=dtype, offset=header_size).reshape(shape)


class FashionMnist(Dataset):
    """(uint8 image tensor [28, 28], int label) per sample, held in memory."""

    def __init__(self, data_dir, split):
        prefix = "train" if split == "train" else "t10k"
        images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
        if images.shape[0] != labels.shape[0]:
            raise ValueError(
                f"{data_dir}: {images.shape[0]} images but {labels.shape[0]} labels")
        self.images = torch.from_numpy(images.copy())
        self.labels = torch.from_numpy(labels.astype(np.int64))

    def __len__(self):
        return self.images.shape[0]

    def __getitem__(self, index):
        return self.images[index], int(self.labels[index])


def make_dataset(args):
    """Fashion-MNIST from the IDX files, or with --imagefolder the issue's image baseline:
    torchvision ImageFolder + RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor."""
    if args.imagefolder is None:
        return FashionMnist(args.data_dir, args.split)
    import torchvision
    from torchvision import transforms
    return torchvision.datasets.ImageFolder(
        args.imagefolder,
        transform=transforms.Compose([
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
        ]))


def touch(batch):
    """Reads every byte of `batch` once (a wrapping sum of its 8-byte words, as
    `bench/loader_bench` does); returns the low byte so that it is not optimized away."""
    flat = batch.contiguous().view(-1)
    whole = flat.numel() * flat.element_size() // 8 * 8 // flat.element_size()
    return int(flat[:whole].view(torch.int64).sum()) & 0xFF


def run_rank(rank, args, barrier, results):
    try:
        torch.set_num_threads(1)
        dataset = make_dataset(args)
        sampler = DistributedSampler(
            dataset, num_replicas=args.ranks, rank=rank, shuffle=True, seed=0)
        loader = DataLoader(
            dataset,
            batch_size=args.batch_size,
            sampler=sampler,
            num_workers=args.workers,
            persistent_workers=args.workers > 0,
            drop_last=False)

        epoch = 0
        sampler.set_epoch(epoch)
        iterator = iter(loader)

        def next_batch():
            nonlocal epoch, iterator
            while True:
                try:
                    return next(iterator)
                except StopIteration:
                    epoch += 1
                    sampler.set_epoch(epoch)
                    iterator = iter(loader)

        warmup_end = time.perf_counter() + WARMUP_SECONDS
        while time.perf_counter() < warmup_end:
            next_batch()
        barrier.wait(timeout=300)

        samples = 0
        batches = 0
        start = time.perf_counter()
        deadline = start + args.seconds
        checksum = 0
        while True:
            images, _ = next_batch()
            if args.touch:
                checksum += touch(images)
            samples += images.shape[0]
            batches += 1
            now = time.perf_counter()
            if now >= deadline:
                break
        # Stop the workers here rather than in interpreter teardown, where they can die
        # mid-shutdown and spoil the output.
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        del iterator, loader
        results.put(("ok", rank, samples, batches, now - start, epoch))
    except BaseException:  # reported to the parent, which fails the run
        results.put(("error", rank, traceback.format_exc()))
        barrier.abort()


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2, help="rank processes (default 2)")
    parser.add_argument("--batch-size", type=int, default=64, help="samples per batch (default 64)")
    parser.add_argument("--workers", type=int, default=1,
                        help="DataLoader workers per rank (default 1; 0 loads in the rank)")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="measured seconds, after 1 s of warm-up (default 10)")
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                        help=f"directory with the IDX .gz files (default {DEFAULT_DATA_DIR})")
    parser.add_argument("--split", choices=["train", "test"], default="train")
    parser.add_argument("--imagefolder", metavar="DIR",
                        help="read JPEG/PNG class folders from DIR with torchvision's "
                             "ImageFolder, RandomResizedCrop(224), flip and ToTensor instead")
    parser.add_argument("--touch", action="store_true",
                        help="read every byte of every batch (as loader_bench --touch)")
    parser.add_argument("--json", metavar="FILE",
                        help="also append the result as one JSON line to FILE "
                             "(e.g. bench/results/dataloader_baseline.jsonl)")
    args = parser.parse_args(argv)
    if args.ranks < 1 or args.batch_size < 1 or args.workers < 0 or args.seconds <= 0:
        parser.error("--ranks and --batch-size must be >= 1, --workers >= 0, --seconds > 0")
    return args


def main(argv):
    args = parse_args(argv)
    load_before = os.getloadavg()[0]  # other work on the machine skews the figures
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(args.ranks)
    results = ctx.Queue()
    procs = [ctx.Process(target=run_rank, args=(r, args, barrier, results), daemon=False)
             for r in range(args.ranks)]
    for p in procs:
        p.start()

    per_rank, failure = rank_results.gather(results, procs, timeout_s=args.seconds + 600)
    if failure is not None:
        print(f"baseline: error: {failure}", file=sys.stderr)
        return 1

    total = 0.0
    for rank in sorted(per_rank):
        samples, batches, seconds, epoch = per_rank[rank]
        rate = samples / seconds
        total += rate
        print(f"rank {rank}: samples={samples} batches={batches} seconds={seconds:.3f} "
              f"samples_per_s={rate:.1f} last_epoch={epoch}")
    if args.json:
        json_lines.append(args.json, "dataloader_baseline", load_before, {
            "ranks": args.ranks,
            "batch": args.batch_size,
            "workers": args.workers,
            "seconds": args.seconds,
            "samples_per_s": round(total, 1),
        })
    print(f"baseline: samples_per_s={total:.1f} ranks={args.ranks} "
          f"batch={args.batch_size} workers={args.workers}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
