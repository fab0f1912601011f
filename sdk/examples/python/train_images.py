#!/usr/bin/python3
"""A small CNN trained data-parallel on a folder of JPEGs (class folders, as torchvision's
ImageFolder) with ember.train, the images decoded by emberd with RandomResizedCrop(224) and
a horizontal flip (configs/pipelines/imagenet_train.yaml), scored on a second folder
(resize 256, center crop 224). The model downsamples the crop 4x on the fly, so that a step
costs less than decoding its batch: the input pipeline is what is measured.

  python3 train_images.py --train PHOTOS --val PHOTOS_VAL --workers 2 [--epochs 2]

(bench/make_photo_folder.py makes both: e.g. --count 2000 and --count 500 --seed 1). Prints,
last,
  result: test_accuracy=0.8123 train_seconds=45.67 ranks=2
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import ember
import ember.train as train
from image_cnn import SmallCnn  # beside this script, shared with the baselines

# The repository's configs/pipelines (this file is sdk/examples/python/train_images.py).
PIPELINES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                         "configs", "pipelines")


def pipeline(name):
    with open(os.path.join(PIPELINES, name)) as f:
        return f.read()


def test_accuracy(model, path, job, batch_size):
    """The share of the folder at `path` the model classifies correctly; each rank scores its
    part."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.int64)
    loader = ember.Loader(path, batch_size, epochs=1, shuffle=False, job=job + ".eval",
                          format="imagefolder", pipeline=pipeline("imagenet_eval.yaml"))
    with torch.no_grad():
        for batch in loader:
            y = batch["label"].long().reshape(-1)
            counts += torch.stack([model(batch["image"]).argmax(1).eq(y).sum(),
                                   torch.tensor(len(y))])
    dist.all_reduce(counts)
    return counts[0].item() / counts[1].item()


def train_loop(config):
    torch.set_num_threads(1)
    torch.manual_seed(config["seed"])
    model = train.prepare(SmallCnn(config["classes"]))
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    loader = train.loader("train", config["batch_size"], epochs=config["epochs"],
                          format="imagefolder", pipeline=pipeline("imagenet_train.yaml"))
    state = train.get_checkpoint()
    if state is not None:
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    start = time.perf_counter()
    for epoch in range(loader.state_dict()["epoch"], config["epochs"]):
        for batch in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(batch["image"]), batch["label"].long().reshape(-1))
            loss.backward()
            optimizer.step()
        train.report({"epoch": epoch, "loss": round(loss.item(), 4)},
                     checkpoint={"model": model.module.state_dict(),
                                 "optimizer": optimizer.state_dict()})
    seconds = time.perf_counter() - start
    context = train.get_context()
    accuracy = test_accuracy(model.module, config["val"], context.job, config["batch_size"])
    return accuracy, seconds, context.world_size


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", required=True, help="a folder of class folders of JPEGs")
    parser.add_argument("--val", required=True, help="the same classes, other images")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="per worker")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", metavar="DIR", help="checkpoints; resumes from them")
    args = parser.parse_args()
    classes = len([d for d in os.listdir(args.train)
                   if os.path.isdir(os.path.join(args.train, d))])
    result = train.run(train_loop, workers=args.workers, seed=args.seed,
                       config={"epochs": args.epochs, "batch_size": args.batch_size,
                               "lr": args.lr, "seed": args.seed, "classes": classes,
                               "val": os.path.realpath(args.val)},
                       datasets={"train": os.path.realpath(args.train)},
                       checkpoint_dir=args.checkpoint)
    accuracy, seconds, ranks = result.value
    print(f"result: test_accuracy={accuracy:.4f} train_seconds={seconds:.2f} ranks={ranks}",
          flush=True)


if __name__ == "__main__":
    main()
