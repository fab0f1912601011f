"""Ray Train baseline of the training scenario: bench/python_ddp.py --task fmnist on Ray.

Run with the bench venv's python (bench/setup-baselines prints it). The same model
(FashionCnn), optimizer (Adam, --lr), per-rank batch (64), epochs (2), seed and test
evaluation as python_ddp.py, imported from it; only the data path and the process
management are Ray's:
  - a local Ray instance: ray.init(num_cpus=2, _temp_dir=--temp-dir, include_dashboard=False);
  - the Fashion-MNIST train split, read from its IDX .gz files, in a Ray Dataset
    (ray.data.from_items: 200 blocks in the object store);
  - TorchTrainer with ScalingConfig(num_workers=2, use_gpu=False): 2 worker actors, a gloo
    process group, the model wrapped by ray.train.torch.prepare_model (DDP);
  - each worker reads its shard with get_dataset_shard("train").iter_torch_batches(
    batch_size=64, local_shuffle_buffer_size=...), Ray's documented ingest path.
Prints, last, one line: result: {"system": "ray-train", "train_s", "accuracy", ...}.
train_s is rank 0's time from before its first batch to after its last step (as
python_ddp.py's train_seconds); fit_s is the driver's TorchTrainer.fit() from call to return.

Every Ray process of the run (GCS, raylet, workers, agents) has --temp-dir's path in its
command line: measure it with bench/measure.py --match <temp-dir>.
"""

import argparse
import json
import os
import sys
import time
import types

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH_DIR)

import ray  # noqa: E402
import ray.train  # noqa: E402
import ray.train.torch  # noqa: E402
import ray_fit  # noqa: E402  bench/baselines/, beside this file

FMNIST_DIR = "/usr/share/datasets/fashion-mnist"


def train_loop_per_worker(config):
    """One Ray Train worker: python_ddp.py's training loop on this worker's dataset shard."""
    import torch
    import torch.nn.functional as F

    from ddp_baseline import FashionCnn
    from python_ddp import fmnist_inputs, test_accuracy

    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(config["seed"])
    model = ray.train.torch.prepare_model(FashionCnn())
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    shard = ray.train.get_dataset_shard("train")

    start = time.perf_counter()
    steps = samples = 0
    for epoch in range(config["epochs"]):
        model.train()
        for batch in shard.iter_torch_batches(
                batch_size=config["batch_size"],
                local_shuffle_buffer_size=config["shuffle_buffer"],
                local_shuffle_seed=config["seed"] + epoch):
            x, y = fmnist_inputs(batch["image"], batch["label"])
            del batch
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            steps += 1
            samples += len(y)
    train_s = time.perf_counter() - start

    # python_ddp.py's evaluation as it is: each rank scores its share of the test split
    # (batch 1000, in-process DataLoader) and the counts are all-reduced.
    args = types.SimpleNamespace(task="fmnist", loader="dataloader", workers=0,
                                 seed=config["seed"], batch_size=config["batch_size"])
    accuracy = test_accuracy(args, model.module, rank, world_size)
    # Ray Train V2 hands the driver only metrics attached to a checkpoint: rank 0 writes its
    # figures to a file of the run's temp dir instead.
    if rank == 0:
        with open(config["result_file"], "w") as f:
            json.dump({"train_s": train_s, "accuracy": accuracy, "steps": steps,
                       "samples_per_rank": samples}, f)


def load_train_split(limit):
    """The train split as a Ray Dataset of {"image": uint8 [28, 28], "label": uint8} rows."""
    from dataloader_baseline import read_idx
    images = read_idx(os.path.join(FMNIST_DIR, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(FMNIST_DIR, "train-labels-idx1-ubyte.gz"))
    if limit:
        images, labels = images[:limit], labels[:limit]
    return ray.data.from_items([{"image": image, "label": label}
                                for image, label in zip(images, labels)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--temp-dir", required=True,
                        help="Ray's per-run temp dir (sockets, logs, spilled objects, results); "
                             "keep it short: Ray's unix socket paths live under it")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0,
                        help="train on the first LIMIT samples only (quick tests)")
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--ranks", type=int, default=2, help="Ray Train workers")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shuffle-buffer", type=int, default=10000,
                        help="iter_torch_batches' local_shuffle_buffer_size (rows)")
    args = parser.parse_args()
    launch = time.perf_counter()
    samples = []

    def datasets():
        dataset = load_train_split(args.limit)
        samples.append(dataset.count())
        return {"train": dataset}

    try:
        # cpus=2: the 2 training workers, one CPU each (ScalingConfig's default), as the
        # other systems get 2 ranks on this 2-core machine; Ray would otherwise count every
        # core of the host. The workers import bench/'s modules (python_ddp, ddp_baseline).
        metrics, fit_s = ray_fit.fit(
            "fmnist", train_loop_per_worker,
            {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
             "seed": args.seed, "shuffle_buffer": args.shuffle_buffer},
            datasets, ranks=args.ranks, cpus=2, temp_dir=args.temp_dir,
            import_dirs=[BENCH_DIR])
    except ray_fit.RayRunFailed as e:
        print(f"ray_train_fmnist: error: {e}", file=sys.stderr)
        return 1
    print("result: " + json.dumps({
        "system": "ray-train",
        "train_s": round(metrics["train_s"], 2),
        "fit_s": round(fit_s, 2),
        "run_s": round(time.perf_counter() - launch, 2),
        "accuracy": round(metrics["accuracy"], 4),
        "epochs": args.epochs,
        "ranks": args.ranks,
        "batch_size": args.batch_size,
        "samples": samples[0],
        "steps": metrics["steps"],
        "shuffle_buffer": args.shuffle_buffer,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
