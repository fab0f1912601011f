#!/usr/bin/python3
"""One DDP training script, two loaders: torch's DataLoader or ember.Loader (issue 14's benchmark).

Run under ember-run (one process per rank; EMBER_RANK, EMBER_WORLD_SIZE), by
`bench/compare python_loaders`. Everything but the loader is the same for both: the process group
(gloo over a FileStore, --store), the model, the optimizer, the step, torch threads (1).

  --task fmnist: the example CNN of sdk/examples/fashion_cnn.cc on Fashion-MNIST, Adam 1e-3,
    batch 64 per rank, --epochs epochs; then the test split's accuracy (each rank scores
    its share, read through the same kind of loader).
  --task jpeg: a JPEG class folder (bench/make_jpeg_folder.py) with RandomResizedCrop(224)
    + horizontal flip (configs/pipelines/imagenet_train.yaml; torchvision's for the
    DataLoader), uint8 CHW, and a small CNN step, for --steps steps per rank; images/s over
    the steps after the first --warmup.

--loader dataloader: torch.utils.data.DataLoader over a DistributedSampler (shuffled),
--workers workers per rank, persistent workers, pin_memory off. --loader ember: ember.Loader
on the registered --dataset / --test-dataset of $EMBER_SOCKET's emberd. --loader none: no
loader, one batch of zeros of the task's shape trained on again and again (the floor: what
the ranks take without any loader).
Rank 0 prints, last:

  python_ddp: task=<t> loader=<l> workers=<w> ranks=<R> batch=<B> steps=<S>
    train_seconds=<f> images_per_s=<f> test_accuracy=<f>
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddp_baseline import FashionCnn  # bench/, beside this script: the example CNN

FMNIST_DIR = "/usr/share/datasets/fashion-mnist"
FMNIST_MEAN, FMNIST_STD = 0.2860, 0.3530
IMAGE_MEAN, IMAGE_STD = 0.45, 0.225


def small_image_cnn():
    """[B, 3, 224, 224] -> [B, 10]: a cheap step, so that the loader is what is measured."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=4, padding=2), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def fmnist_inputs(images, labels):
    x = images.float().div(255).sub(FMNIST_MEAN).div(FMNIST_STD).unsqueeze(1)
    return x, labels.long().reshape(-1)


def image_inputs(images, labels):
    return images.float().div(255).sub(IMAGE_MEAN).div(IMAGE_STD), labels.long().reshape(-1)


class Batches:
    """Epochs of (images, labels) batches of one rank from either loader."""

    def __init__(self, args, split, rank, world_size, shuffle=True, batch_size=None,
                 epochs=None):
        batch_size = batch_size or args.batch_size
        self.sampler = None
        if args.loader == "none":
            shape = (28, 28) if args.task == "fmnist" else (3, 224, 224)
            batch = {"image": torch.zeros((batch_size, *shape), dtype=torch.uint8),
                     "label": torch.zeros(batch_size, dtype=torch.uint8)}
            self.loader = [batch] * ((60000 if split == "train" else 10000) //
                                     (batch_size * world_size))
            return
        if args.loader == "ember":
            import ember
            dataset = args.dataset if split == "train" else args.test_dataset
            self.loader = ember.Loader(dataset, batch_size, seed=args.seed, epochs=epochs,
                                       shuffle=shuffle, job=f"{args.job}.{split}",
                                       rank=rank, world_size=world_size)
            return
        from torch.utils.data import DataLoader, DistributedSampler
        dataset = make_dataset(args, split)
        self.sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank,
                                          shuffle=shuffle, seed=args.seed)
        self.loader = DataLoader(dataset, batch_size=batch_size, sampler=self.sampler,
                                 num_workers=args.workers,
                                 persistent_workers=args.workers > 0, pin_memory=False)

    def epoch(self, epoch):
        if self.sampler is None:
            for batch in self.loader:
                yield batch["image"], batch["label"]
        else:
            self.sampler.set_epoch(epoch)
            yield from self.loader

    def close(self):
        """Stops the DataLoader's workers now: in interpreter teardown they can die
        mid-shutdown and fail the run."""
        iterator = getattr(self.loader, "_iterator", None)
        if iterator is not None:
            iterator._shutdown_workers()
        self.loader = None


def make_dataset(args, split):
    if args.task == "fmnist":
        from dataloader_baseline import FashionMnist  # bench/, beside this script
        return FashionMnist(FMNIST_DIR, split)
    import torchvision
    from torchvision import transforms
    return torchvision.datasets.ImageFolder(args.folder, transform=transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
        transforms.PILToTensor()]))


def test_accuracy(args, model, rank, world_size):
    model.eval()
    counts = torch.zeros(2, dtype=torch.int64)  # correct, total
    batches = Batches(args, "test", rank, world_size, shuffle=False, batch_size=args.batch_size,
                      epochs=1)  # the training batch: evaluation must not be the memory peak
    with torch.no_grad():
        for images, labels in batches.epoch(0):
            x, y = fmnist_inputs(images, labels)
            counts += torch.stack([model(x).argmax(1).eq(y).sum(), torch.tensor(len(y))])
    batches.close()
    dist.all_reduce(counts)
    return counts[0].item() / counts[1].item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=["fmnist", "jpeg"], required=True)
    parser.add_argument("--loader", choices=["dataloader", "ember", "none"], required=True)
    parser.add_argument("--workers", type=int, default=1, help="DataLoader workers per rank")
    parser.add_argument("--store", required=True, help="FileStore path of the process group")
    parser.add_argument("--dataset", default="fmnist-train", help="ember: training dataset")
    parser.add_argument("--test-dataset", default="fmnist-test", help="ember: test dataset")
    parser.add_argument("--folder", help="DataLoader, --task jpeg: the class folder")
    parser.add_argument("--epochs", type=int, default=2, help="--task fmnist")
    parser.add_argument("--steps", type=int, default=200, help="--task jpeg: steps per rank")
    parser.add_argument("--warmup", type=int, default=10, help="--task jpeg: untimed steps")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rank, world_size = int(os.environ["EMBER_RANK"]), int(os.environ["EMBER_WORLD_SIZE"])
    args.job = os.environ["EMBER_JOB"]
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    batches = Batches(args, "train", rank, world_size,
                      epochs=args.epochs if args.task == "fmnist" else None)
    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=rank,
                            world_size=world_size)
    model = DDP(FashionCnn() if args.task == "fmnist" else small_image_cnn())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    inputs = fmnist_inputs if args.task == "fmnist" else image_inputs
    max_steps = args.steps if args.task == "jpeg" else None
    warmup = args.warmup if args.task == "jpeg" else 0

    start = time.perf_counter()
    steps = images = 0
    epoch = 0
    while max_steps is None and epoch < args.epochs or max_steps and steps < max_steps:
        model.train()
        for images_batch, labels in batches.epoch(epoch):
            x, y = inputs(images_batch, labels)
            del images_batch, labels
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            steps += 1
            if steps == warmup:
                start, images = time.perf_counter(), 0
            else:
                images += len(y)
            if steps == max_steps:
                break
        epoch += 1
    train_seconds = time.perf_counter() - start
    batches.close()
    rate = torch.tensor([images / train_seconds])
    dist.all_reduce(rate)  # images/s over all ranks

    accuracy = test_accuracy(args, model.module, rank, world_size) if args.task == "fmnist" else 0
    if rank == 0:
        print(f"python_ddp: task={args.task} loader={args.loader} "
              f"workers={args.workers if args.loader == 'dataloader' else 0} ranks={world_size} "
              f"batch={args.batch_size} steps={steps} train_seconds={train_seconds:.2f} "
              f"images_per_s={rate.item():.1f} test_accuracy={accuracy:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    # Exit with the model still referenced: freeing torch 1.13's DDP Reducer (here, or in
    # interpreter teardown) joins ProcessGroupGloo's worker thread with the GIL held while
    # that thread waits for the GIL to free a tensor (gdb of a rank hung 15 minutes at
    # exit). Everything is printed by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
