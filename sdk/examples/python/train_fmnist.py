#!/usr/bin/python3
"""Data-parallel training of a small CNN on Fashion-MNIST with batches served by emberd.

The Python twin of sdk/examples/fashion_mnist_train.cc: the same model, hyperparameters
and last line. One process per rank, under either launcher, unchanged:

  ember-run --nproc 2 -- python3 train_fmnist.py
  EMBER_SOCKET=... torchrun --nproc-per-node 2 train_fmnist.py

(torch 1.13's torchrun spells it --nproc_per_node; Debian's, under Python 3.11, also needs
--redirects 1 --tee 1 to get past its own bug with the default "0".)

Data comes only through ember.Loader; gradients are averaged by torch's DDP over gloo,
its process group bootstrapped through emberd (no MASTER_ADDR / MASTER_PORT). After
training, every rank scores its share of the test split and rank 0 prints

  result: test_accuracy=0.9012 train_seconds=123.45 ranks=2

With --checkpoint DIR, rank 0 writes DIR/checkpoint.pt (model, optimizer, loader state)
every --checkpoint-every steps and after each epoch; a run that finds one resumes there.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import ember
from fashion_cnn import FashionCnn  # fashion_cnn.py, beside this script

PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530


def inputs(batch):
    """Normalized float images [B, 1, 28, 28] and int64 labels [B] of a batch (copies:
    the batch's ring slot can go back as soon as the batch is dropped)."""
    x = batch["image"].float().div(255).sub(PIXEL_MEAN).div(PIXEL_STD).unsqueeze(1)
    return x, batch["label"].long().reshape(-1)


def test_accuracy(model, dataset, job, batch_size):
    """The share of `dataset` the model classifies correctly; each rank scores its part."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.int64)  # correct, total
    with torch.no_grad():
        for batch in ember.Loader(dataset, batch_size, epochs=1, shuffle=False, job=job + ".eval"):
            x, y = inputs(batch)
            counts += torch.stack([model(x).argmax(1).eq(y).sum(), torch.tensor(len(y))])
    dist.all_reduce(counts)
    return counts[0].item() / counts[1].item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="fmnist-train", help="registered training dataset")
    parser.add_argument("--test-dataset", default="fmnist-test", help="registered test dataset")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--checkpoint", metavar="DIR",
                        help="resume from and write DIR/checkpoint.pt")
    parser.add_argument("--checkpoint-every", type=int, default=0, metavar="K",
                        help="also checkpoint every K steps (0: after each epoch only)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    loader = ember.Loader(args.dataset, args.batch_size, seed=args.seed, epochs=args.epochs)
    net = FashionCnn()
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
    path = args.checkpoint and os.path.join(args.checkpoint, "checkpoint.pt")
    step = 0
    if path and os.path.exists(path):
        state = torch.load(path)
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
        step = state["step"]
        if loader.rank == 0:
            print(f"resumed: from {path} at step {step} ({state['loader']})", flush=True)

    def save():
        os.makedirs(args.checkpoint, exist_ok=True)
        torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                    "loader": loader.state_dict(), "step": step}, path + ".tmp")
        os.replace(path + ".tmp", path)  # a run killed mid-write keeps the previous one

    first_epoch = loader.state_dict()["epoch"]
    if first_epoch < args.epochs:
        len(loader)  # opens the stream: emberd fills the ring while the process group forms
    ember.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(net)

    start = time.perf_counter()
    for epoch in range(first_epoch, args.epochs):
        model.train()
        epoch_start, loss_sum, steps = time.perf_counter(), 0.0, 0
        stall = loader.stats()["data_stall_seconds"]
        for batch in loader:
            x, y = inputs(batch)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            step, steps, loss_sum = step + 1, steps + 1, loss_sum + loss.item()
            if rank == 0 and path and (batch.last or args.checkpoint_every and
                                       step % args.checkpoint_every == 0):
                save()
        if rank == 0:
            stall = loader.stats()["data_stall_seconds"] - stall
            print(f"epoch {epoch + 1}/{args.epochs} loss={loss_sum / max(steps, 1):.4f} "
                  f"steps={steps} seconds={time.perf_counter() - epoch_start:.2f} "
                  f"loader_wait_seconds={stall:.3f}", flush=True)
    train_seconds = time.perf_counter() - start

    accuracy = test_accuracy(net, args.test_dataset, loader.job, args.batch_size)
    if rank == 0:
        print(f"result: test_accuracy={accuracy:.4f} train_seconds={train_seconds:.2f} "
              f"ranks={dist.get_world_size()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
