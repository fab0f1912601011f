"""PyTorch DDP + DataLoader baseline of the image-training scenario: the training of
sdk/examples/python/train_images.py (Ember's example) with torch's own input pipeline.

Run with the bench venv's python (bench/setup-baselines prints it):

  $PY bench/baselines/dataloader_images_train.py --train PHOTOS --val PHOTOS_VAL \
      [--ranks 2] [--epochs 2] [--batch-size 64] [--lr 3e-3] [--seed 0] [--loader-workers 2]

Everything but the data path and the process management is train_images.py's: its SmallCnn
(imported from that file, not copied), Adam with --lr 3e-3, batch 64 per rank, 2 epochs,
torch.set_num_threads(1) and torch.manual_seed(--seed) in every rank before the model is
built, uint8 CHW crops given to the model (which divides by 255 and pools 4x itself), and
the test accuracy on the --val folder, each rank scoring its share and the (correct, total)
counts all-reduced. The time is measured the same way: train_seconds is rank 0's time from
before its first batch to after its last optimizer step.

The data path is torch's documented one:
  - torchvision.datasets.ImageFolder(--train) with transforms.Compose([RandomResizedCrop(224),
    RandomHorizontalFlip(), PILToTensor()]): torchvision's defaults, scale (0.08, 1),
    ratio (3/4, 4/3), p = 0.5, PIL bilinear (antialiased) resampling: what Ember's
    configs/pipelines/imagenet_train.yaml mirrors;
  - a DistributedSampler (shuffled, seed --seed, set_epoch every epoch) and a DataLoader of
    batch 64 with --loader-workers worker processes per rank (default 2) and persistent
    workers when there are any; pin_memory off (no GPU);
  - evaluation: ImageFolder(--val) with Resize(256) + CenterCrop(224) + PILToTensor
    (configs/pipelines/imagenet_eval.yaml), a DistributedSampler(shuffle=False), batch 64,
    the same number of workers (not persistent: one pass). DistributedSampler pads each
    rank's share to the same length by repeating the first samples; the pad is at the end
    of each rank's list, and only the rank's real samples (len(range(rank, N, ranks))) are
    scored, so the accuracy is over exactly the N images of the folder.
The training DataLoader's workers are stopped before evaluation starts, so that at most
one set of workers runs at a time.

Processes: this script spawns --ranks rank processes (torch.multiprocessing, spawn), which
meet over a gloo process group at MASTER_ADDR=127.0.0.1 and a free port this script picks
(loopback only), the model wrapped in DistributedDataParallel with its defaults; each rank
reports to the parent through a queue (bench/rank_results.py), and every wait is bounded
(--timeout). With 2 ranks and the default 2 loader workers per rank, 6 processes share the
machine's cores; --loader-workers 0 decodes in the rank itself.

Prints, last, the same line as train_images.py:
  result: test_accuracy=0.4760 train_seconds=5.75 ranks=2

bench/baselines/dali_images_train.py imports this file's rank management and training loop,
so that only the data path differs between the two.
"""

import argparse
import datetime
import os
import socket
import sys
import time
import traceback

BASELINES = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(BASELINES)
EXAMPLES = os.path.join(os.path.dirname(BENCH), "sdk", "examples", "python")
sys.path.insert(0, BENCH)
import rank_results  # noqa: E402  bench/rank_results.py


def small_cnn_class():
    """train_images.py's SmallCnn (sdk/examples/python/image_cnn.py): the one model."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    from image_cnn import SmallCnn
    return SmallCnn


def class_names(train, val):
    """The sorted class folder names of --train (ImageFolder's order: label i is the i-th);
    exits if --val's class folders are not the same."""
    names = []
    for root in (train, val):
        if not os.path.isdir(root):
            sys.exit(f"{root}: not a directory")
        names.append(sorted(e.name for e in os.scandir(root) if e.is_dir()))
    if not names[0]:
        sys.exit(f"{train}: no class folders")
    if names[0] != names[1]:
        sys.exit(f"{val}: its class folders differ from {train}'s")
    return names[0]


def parser(description):
    """The command line of the three image-training baselines; each adds its own options."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--train", required=True, help="a folder of class folders of JPEGs")
    p.add_argument("--val", required=True, help="the same classes, other images")
    p.add_argument("--ranks", type=int, default=2, help="data-parallel ranks (default 2)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds to wait for the whole run (and for a collective) before "
                        "failing (default 1800)")
    return p


def check_args(p, args):
    if min(args.ranks, args.epochs, args.batch_size) < 1 or args.timeout <= 0:
        p.error("--ranks, --epochs and --batch-size must be >= 1, --timeout > 0")
    args.train, args.val = os.path.realpath(args.train), os.path.realpath(args.val)
    args.classes = len(class_names(args.train, args.val))
    return args


def result_line(accuracy, seconds, ranks):
    return f"result: test_accuracy={accuracy:.4f} train_seconds={seconds:.2f} ranks={ranks}"


def train_and_score(args, train_epoch, eval_batches, after_training=None):
    """train_images.py's train_loop in one rank of an initialized process group:
    train_epoch(epoch) gives that epoch's (uint8 images [B, 3, 224, 224], labels) batches of
    this rank; eval_batches() this rank's share of the test folder, each sample once;
    after_training() (optional) frees the training input before evaluation. Returns
    (test accuracy over all ranks, this rank's train seconds)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = DDP(small_cnn_class()(args.classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        for images, labels in train_epoch(epoch):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels.long().reshape(-1))
            loss.backward()
            optimizer.step()
    seconds = time.perf_counter() - start
    if after_training is not None:
        after_training()

    module = model.module
    module.eval()
    counts = torch.zeros(2, dtype=torch.int64)  # correct, total
    with torch.no_grad():
        for images, labels in eval_batches():
            y = labels.long().reshape(-1)
            counts += torch.stack([module(images).argmax(1).eq(y).sum(), torch.tensor(len(y))])
    dist.all_reduce(counts)
    return counts[0].item() / counts[1].item(), seconds


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(run_rank, rank, args, results):
    try:
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=args.ranks,
                                timeout=datetime.timedelta(seconds=args.timeout))
        accuracy, seconds = run_rank(rank, args)
        dist.barrier()  # the ranks leave together
        dist.destroy_process_group()
        results.put(("ok", rank, accuracy, seconds))
    except BaseException:  # reported to the parent, which fails the run
        results.put(("error", rank, traceback.format_exc()))


def spawn_ranks(name, run_rank, args):
    """Runs run_rank(rank, args) -> (accuracy, train seconds) in args.ranks spawned
    processes that share a gloo process group (127.0.0.1, a free port), waits for them
    (args.timeout at most) and prints rank 0's result line last. Returns the exit status."""
    import torch.multiprocessing as mp
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(_free_port())
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # as Ember's Gloo: loopback only
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(run_rank, r, args, results))
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    per_rank, failure = rank_results.gather(results, procs, timeout_s=args.timeout)
    if failure is None:
        bad = [f"rank {r}: {p.exitcode}" for r, p in enumerate(procs) if p.exitcode != 0]
        if bad:
            failure = "a rank did not exit cleanly: " + ", ".join(bad)
    if failure is not None:
        print(f"{name}: error: {failure}", file=sys.stderr)
        return 1
    accuracy, seconds = per_rank[0]
    print(result_line(accuracy, seconds, args.ranks), flush=True)
    return 0


def _stop_workers(loader):
    """Stops a DataLoader's workers now (persistent ones would live until the loader is
    collected; in interpreter teardown they can die mid-shutdown and fail the run)."""
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None:
        iterator._shutdown_workers()


def run_rank(rank, args):
    """One rank: DataLoader over ImageFolder (see the module docstring)."""
    import torchvision
    from torch.utils.data import DataLoader, DistributedSampler
    from torchvision import transforms

    train_set = torchvision.datasets.ImageFolder(args.train, transform=transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
        transforms.PILToTensor()]))
    sampler = DistributedSampler(train_set, num_replicas=args.ranks, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=False)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler,
                              num_workers=args.loader_workers,
                              persistent_workers=args.loader_workers > 0, pin_memory=False)

    def train_epoch(epoch):
        sampler.set_epoch(epoch)
        return train_loader

    def eval_batches():
        val_set = torchvision.datasets.ImageFolder(args.val, transform=transforms.Compose([
            transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()]))
        val_sampler = DistributedSampler(val_set, num_replicas=args.ranks, rank=rank,
                                         shuffle=False, drop_last=False)
        loader = DataLoader(val_set, batch_size=args.batch_size, sampler=val_sampler,
                            num_workers=args.loader_workers, pin_memory=False)
        # The sampler's padding (repeats of the first samples) ends the rank's list.
        real = len(range(rank, len(val_set), args.ranks))
        for images, labels in loader:
            if real <= 0:
                break
            yield images[:real], labels[:real]
            real -= len(labels)

    return train_and_score(args, train_epoch, eval_batches,
                           after_training=lambda: _stop_workers(train_loader))


def main(argv):
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--loader-workers", type=int, default=2,
                   help="DataLoader worker processes per rank (default 2; 0: in the rank)")
    args = p.parse_args(argv)
    if args.loader_workers < 0:
        p.error("--loader-workers must be >= 0")
    return spawn_ranks("dataloader_images_train", run_rank, check_args(p, args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
