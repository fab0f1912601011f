#!/usr/bin/python3
"""Reads a remote image set as fast as one rank can, with one of three loaders, and prints
its images/s (webdataset_bench's side-by-side runs; run by bench/compare, in the baselines'
venv: bench/setup-baselines):

  ember     ember.Loader on a dataset registered with emberd (--dataset, --socket): the
            daemon reads the shards through its node cache and decodes with its pipeline
  mosaic    Mosaic Streaming's StreamingDataset (--remote s3://... or a directory, --local
            its cache directory) in torch's DataLoader (--workers per rank)
  wds       webdataset's WebDataset over the shards' URLs (--urls, a brace pattern) in
            torch's DataLoader (--workers per rank), split by rank and worker

The baselines decode and augment as configs/pipelines/imagenet_train.yaml does (decode,
random resized crop to 224, horizontal flip, normalize, CHW float32) with PIL and
torchvision. --ranks N starts N rank processes (RANK/WORLD_SIZE and Mosaic's
LOCAL_RANK/LOCAL_WORLD_SIZE set for each) and prints their summed rate:
  bench: samples_per_s=X
Each rank reads --seconds after one second of warm-up (or --epochs whole epochs).
"""

import argparse
import os
import subprocess
import sys
import time

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def transform():
    import torchvision.transforms as T
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize(MEAN, STD)])


def mosaic_loader(args, rank, world):
    import io
    import torch
    from PIL import Image
    from streaming import StreamingDataset

    aug = transform()

    class Photos(StreamingDataset):
        def __getitem__(self, i):
            sample = super().__getitem__(i)
            return aug(Image.open(io.BytesIO(sample["jpeg"])).convert("RGB")), sample["label"]

    dataset = Photos(remote=args.remote, local=args.local, shuffle=True, batch_size=args.batch,
                     shuffle_seed=1, predownload=8 * args.batch, cache_limit=args.cache_limit)
    return torch.utils.data.DataLoader(dataset, batch_size=args.batch, num_workers=args.workers,
                                       persistent_workers=args.workers > 0, drop_last=True)


def wds_loader(args, rank, world):
    import torch
    import webdataset as wds

    aug = transform()

    def by_rank(shards):  # this rank's shards: every world-th
        for i, shard in enumerate(shards):
            if i % world == rank:
                yield shard

    dataset = (wds.WebDataset(args.urls, shardshuffle=100, nodesplitter=by_rank,
                              workersplitter=wds.split_by_worker, empty_check=False)
               .shuffle(1000).decode("pil").to_tuple("jpg", "cls").map_tuple(aug, int)
               .repeat())
    return torch.utils.data.DataLoader(dataset, batch_size=args.batch, num_workers=args.workers,
                                       persistent_workers=args.workers > 0)


def ember_loader(args, rank, world):
    import ember
    client = ember.Client(args.socket)
    return ember.Loader(args.dataset, args.batch, rank=rank, world_size=world, client=client,
                        job="stream-readers", seed=1, epochs=None)


def rank_main(args):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    make = {"ember": ember_loader, "mosaic": mosaic_loader, "wds": wds_loader}[args.system]
    loader = make(args, rank, world)
    count, start = 0, None
    began = time.monotonic()
    done = False
    while not done:
        for batch in loader:
            images = batch["image"] if isinstance(batch, dict) else batch[0]
            n = images.shape[0]
            if start is None and time.monotonic() - began >= 1.0:
                start = time.monotonic()  # warm-up over: count from the next batch
                continue
            if start is not None:
                count += n
                if time.monotonic() - start >= args.seconds:
                    done = True
                    break
    elapsed = time.monotonic() - start
    print(f"rank {rank}: {count} samples in {elapsed:.2f} s", flush=True)
    print(f"rate {count / elapsed:.1f}", flush=True)
    os._exit(0)  # DataLoader workers and Mosaic's threads end with the process


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=["ember", "mosaic", "wds"], required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--remote", help="mosaic: the MDS set (s3://... or a directory)")
    parser.add_argument("--local", help="mosaic: its cache directory")
    parser.add_argument("--cache-limit", default=None, help="mosaic: e.g. 100mb")
    parser.add_argument("--urls", help="wds: the shards' URLs (a brace pattern)")
    parser.add_argument("--dataset", help="ember: the registered dataset")
    parser.add_argument("--socket", help="ember: emberd's socket")
    args = parser.parse_args()
    if "RANK" in os.environ:
        return rank_main(args)
    procs = []
    for rank in range(args.ranks):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(args.ranks),
               "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(args.ranks),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517"}
        procs.append(subprocess.Popen([sys.executable, __file__, *sys.argv[1:]], env=env,
                                      stdout=subprocess.PIPE, text=True))
    total, failed = 0.0, False
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        sys.stdout.write(out)
        rates = [float(line.split()[1]) for line in out.splitlines() if line.startswith("rate ")]
        failed = failed or p.returncode != 0 or len(rates) != 1
        total += sum(rates)
    if failed:
        return 1
    print(f"bench: samples_per_s={total:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
