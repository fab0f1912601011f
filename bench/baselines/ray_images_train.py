"""Ray Train + Ray Data baseline of the image-training scenario: the training of
sdk/examples/python/train_images.py (Ember's example) on Ray.

Run with the bench venv's python (bench/setup-baselines prints it):

  $PY bench/baselines/ray_images_train.py --train PHOTOS --val PHOTOS_VAL --temp-dir T \
      [--ranks 2] [--epochs 2] [--batch-size 64] [--lr 3e-3] [--seed 0]

Everything but the data path and the process management is train_images.py's: its SmallCnn
(imported from that file through bench/baselines/dataloader_images_train.py, not copied),
Adam with --lr 3e-3, batch 64 per worker, 2 epochs, torch.set_num_threads(1) and
torch.manual_seed(--seed) in every worker before the model is built, uint8 CHW crops given
to the model, and the test accuracy on --val, each worker scoring its share and the
(correct, total) counts all-reduced. train_seconds is rank 0's time from before its first
batch to after its last optimizer step.

Ray's parts, its documented path for data-parallel training with Ray Data ingest (as
bench/baselines/ray_train_fmnist.py):
  - a local Ray instance: ray.init(num_cpus=ranks + --data-cpus, _temp_dir=--temp-dir,
    include_dashboard=False) (a per-run directory that every Ray process names; no web UI).
    num_cpus is Ray's count of logical CPUs, a scheduling budget, not a limit: with
    ray_train_fmnist.py's num_cpus=2 the 2 training workers (1 CPU each, ScalingConfig's
    default) hold all of it, Ray Train excludes their CPUs from Ray Data's budget (Ray PR
    41603), and the read + transform tasks never start: the run hangs (seen here: "Tasks:
    1 [backpressured:tasks(ResourceBudget)]", budget cpu=0.0, until killed after 400 s).
    A worker cannot reserve 0 CPUs ("Bundles cannot be an empty dictionary or resources
    with only 0 values"), and fractional reservations leave Ray Data less than 2 CPUs, that
    is one 1-CPU task at a time. So Ray counts one CPU per training worker plus --data-cpus
    (default 2) for its tasks: 2 read + transform tasks at a time, as DALI (a thread per
    rank) and Ember (a decoder thread per core) decode 2 images at a time here; the
    DataLoader baseline's default is 2 worker processes per rank. All of it shares the
    machine's 2 physical cores, as the other systems' ranks share them with their loaders;
  - the training folder as a Ray Dataset: ray.data.read_images(--train, mode="RGB",
    include_paths=True, shuffle=FileShuffleConfig(seed=--seed)) (Ray's file-level shuffle,
    reseeded at every execution, so every epoch reads the files in a new order: the
    fastest option of Ray's "Shuffling Data" guide, a metadata operation, and with one
    image per file a permutation of all the rows, as DistributedSampler's; no local
    shuffle buffer on top of it), then .map_batches(...)
    applying torchvision's transforms to each image as a PIL image: RandomResizedCrop(224),
    RandomHorizontalFlip(), PILToTensor() (the DataLoader baseline's transforms, uint8 CHW),
    the label being the index of the image's parent folder among the sorted class folders
    (ImageFolder's order). Ray Data runs read + transform as fused tasks, again every epoch
    (the dataset is not materialized), so every epoch draws new crops;
  - TorchTrainer(train_loop_per_worker, scaling_config=ScalingConfig(num_workers=2,
    use_gpu=False), datasets={"train": ..., "val": ...}): 2 worker actors, a gloo process
    group set up by Ray Train, the model wrapped by ray.train.torch.prepare_model (DDP);
    each worker reads its share of every epoch with
    get_dataset_shard("train").iter_torch_batches(batch_size=64) (Ray Train splits each
    dataset between the workers: streaming_split(2, equal=True));
  - evaluation through Ray Data as well: read_images(--val) + map_batches(Resize(256),
    CenterCrop(224), PILToTensor()), split between the workers like the training set;
    equal=True gives every worker the same number of rows, so with a folder whose size is
    not a multiple of the workers up to (workers - 1) images would go unscored (none with
    500 and 2).
The random transforms run in Ray's worker processes and draw from torch's generator as
each process starts it (torch seeds it at random in every new process), not from --seed:
as with any Ray Data pipeline, which rows a worker gets and in which order depends on task
scheduling, so runs are not reproducible anyway; --seed seeds the model (as everywhere) and
the file shuffle.

Prints, last, the same line as train_images.py:
  result: test_accuracy=0.4760 train_seconds=5.75 ranks=2
preceded by `ray_images_train: fit_s=... run_s=...` (the driver's TorchTrainer.fit() and the
whole run, ray.init to ray.shutdown). Every Ray process of the run has --temp-dir's path in
its command line: measure it with bench/measure.py --match <temp-dir>.
"""

import json
import os
import sys
import time

BASELINES = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BASELINES)
import dataloader_images_train as common  # noqa: E402  bench/baselines/, beside this file
import ray_fit  # noqa: E402

import ray  # noqa: E402
import ray.data  # noqa: E402
import ray.train  # noqa: E402
import ray.train.torch  # noqa: E402

def transform_batch(batch, class_index, train):
    """map_batches' function: {"image": decoded HWC uint8 images, "path"} -> {"image": uint8
    [N, 3, 224, 224], "label": int64 [N]}, each image through torchvision's transforms."""
    import numpy as np
    from PIL import Image
    from torchvision import transforms
    if train:
        transform = transforms.Compose([transforms.RandomResizedCrop(224),
                                        transforms.RandomHorizontalFlip(),
                                        transforms.PILToTensor()])
    else:
        transform = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                                        transforms.PILToTensor()])
    images = [transform(Image.fromarray(image)).numpy() for image in batch["image"]]
    labels = [class_index[os.path.basename(os.path.dirname(path))] for path in batch["path"]]
    return {"image": np.stack(images), "label": np.asarray(labels, dtype=np.int64)}


def image_dataset(folder, class_index, train, seed):
    shuffle = ray.data.FileShuffleConfig(seed=seed) if train else None
    dataset = ray.data.read_images(folder, mode="RGB", include_paths=True, shuffle=shuffle)
    return dataset.map_batches(transform_batch, batch_format="numpy",
                               fn_kwargs={"class_index": class_index, "train": train})


def train_loop_per_worker(config):
    """One Ray Train worker: train_images.py's training loop on this worker's shard."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    rank = ray.train.get_context().get_world_rank()
    torch.set_num_threads(1)
    torch.manual_seed(config["seed"])
    model = ray.train.torch.prepare_model(common.small_cnn_class()(config["classes"]))
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    shard = ray.train.get_dataset_shard("train")

    start = time.perf_counter()
    steps = samples = 0
    for _epoch in range(config["epochs"]):
        model.train()
        for batch in shard.iter_torch_batches(batch_size=config["batch_size"]):
            labels = batch["label"].long().reshape(-1)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(batch["image"]), labels)
            loss.backward()
            optimizer.step()
            steps += 1
            samples += len(labels)
    train_s = time.perf_counter() - start

    module = model.module
    module.eval()
    counts = torch.zeros(2, dtype=torch.int64)  # correct, total
    with torch.no_grad():
        for batch in ray.train.get_dataset_shard("val").iter_torch_batches(
                batch_size=config["batch_size"]):
            y = batch["label"].long().reshape(-1)
            counts += torch.stack([module(batch["image"]).argmax(1).eq(y).sum(),
                                   torch.tensor(len(y))])
    dist.all_reduce(counts)
    # Ray Train V2 hands the driver only metrics attached to a checkpoint: rank 0 writes its
    # figures to a file of the run's temp dir instead (as ray_train_fmnist.py).
    if rank == 0:
        with open(config["result_file"], "w") as f:
            json.dump({"train_s": train_s, "accuracy": counts[0].item() / counts[1].item(),
                       "scored": counts[1].item(), "steps": steps,
                       "samples_per_rank": samples}, f)


def main(argv):
    p = common.parser(__doc__.split("\n\n")[0])
    p.add_argument("--temp-dir", required=True,
                   help="Ray's per-run temp dir (sockets, logs, spilled objects, results); "
                        "keep it short: Ray's unix socket paths live under it")
    p.add_argument("--data-cpus", type=int, default=2,
                   help="logical CPUs for Ray Data's tasks, on top of one per training "
                        "worker (default 2; see the module docstring)")
    args = common.check_args(p, p.parse_args(argv))
    if args.data_cpus < 1:
        p.error("--data-cpus must be >= 1")
    classes = common.class_names(args.train, args.val)
    class_index = {name: i for i, name in enumerate(classes)}
    launch = time.perf_counter()
    try:
        # The workers import dataloader_images_train (and through it train_images.py's
        # SmallCnn) by name.
        metrics, fit_s = ray_fit.fit(
            "images", train_loop_per_worker,
            {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
             "seed": args.seed, "classes": len(classes)},
            lambda: {"train": image_dataset(args.train, class_index, True, args.seed),
                     "val": image_dataset(args.val, class_index, False, args.seed)},
            ranks=args.ranks, cpus=args.ranks + args.data_cpus, temp_dir=args.temp_dir,
            import_dirs=[BASELINES], timeout=args.timeout)
    except ray_fit.RayRunFailed as e:
        print(f"ray_images_train: error: {e}", file=sys.stderr)
        return 1
    print(f"ray_images_train: fit_s={fit_s:.2f} run_s={time.perf_counter() - launch:.2f} "
          f"steps={metrics['steps']} samples_per_rank={metrics['samples_per_rank']} "
          f"scored={metrics['scored']}")
    print(common.result_line(metrics["accuracy"], metrics["train_s"], args.ranks), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
