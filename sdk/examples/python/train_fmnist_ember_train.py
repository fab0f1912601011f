#!/usr/bin/python3
"""train_fmnist.py's model, data and result line with ember.train: no process group,
DDP, checkpoint or restart code of its own. Starts its workers itself:

  python3 train_fmnist_ember_train.py --workers 2 [--checkpoint DIR --max-failures 1]

(or runs as one rank under ember-run / torchrun). Prints, last,
  result: test_accuracy=0.9012 train_seconds=123.45 ranks=2
"""

import argparse
import time

import torch
import torch.nn.functional as F

import ember.train as train
from fashion_cnn import FashionCnn  # beside this script, as train_fmnist.py
from train_fmnist import inputs, test_accuracy


def train_loop(config):
    torch.set_num_threads(1)
    torch.manual_seed(config["seed"])
    model = train.prepare(FashionCnn())
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    loader = train.loader("train", config["batch_size"], epochs=config["epochs"])
    state = train.get_checkpoint()
    if state is not None:
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    start = time.perf_counter()
    for epoch in range(loader.state_dict()["epoch"], config["epochs"]):
        for batch in loader:
            x, y = inputs(batch)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        train.report({"epoch": epoch, "loss": round(loss.item(), 4)},
                     checkpoint={"model": model.module.state_dict(),
                                 "optimizer": optimizer.state_dict()})
    seconds = time.perf_counter() - start
    context = train.get_context()
    accuracy = test_accuracy(model.module, config["test"], context.job, config["batch_size"])
    return accuracy, seconds, context.world_size


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dataset", default="fmnist-train")
    parser.add_argument("--test-dataset", default="fmnist-test")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="per worker")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", metavar="DIR", help="checkpoints; resumes from them")
    parser.add_argument("--max-failures", type=int, default=0)
    args = parser.parse_args()
    result = train.run(train_loop, workers=args.workers, seed=args.seed,
                       config={"epochs": args.epochs, "batch_size": args.batch_size,
                               "lr": args.lr, "seed": args.seed, "test": args.test_dataset},
                       datasets={"train": args.dataset}, checkpoint_dir=args.checkpoint,
                       max_failures=args.max_failures)
    accuracy, seconds, ranks = result.value
    print(f"result: test_accuracy={accuracy:.4f} train_seconds={seconds:.2f} ranks={ranks}",
          flush=True)


if __name__ == "__main__":
    main()
