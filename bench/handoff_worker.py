"""One Python rank of bench/compare python_handoff: reads --epochs epochs of a dataset
through the `ember` package found on PYTHONPATH, doing nothing with each batch but
looking at one element, and prints one JSON line: batches, seconds, batches/s, the
median and 99th percentile of the time one next() takes (microseconds: handing a ready
batch to Python), and the process's PSS at the end (MiB)."""

import argparse
import json
import os
import statistics
import time


def pss_mib():
    with open("/proc/self/smaps_rollup", encoding="ascii") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--output", default=None, help="ember.Loader's output= (new module)")
    args = parser.parse_args()
    import ember
    options = dict(epochs=args.epochs, rank=0, world_size=1, job=f"handoff-{os.getpid()}",
                   client=ember.Client(args.socket))
    if args.output is not None:
        options["output"] = args.output
    loader = ember.Loader(args.dataset, args.batch_size, **options)
    latencies = []
    start = time.perf_counter()
    for _ in range(args.epochs):
        epoch = iter(loader)
        while True:
            asked = time.perf_counter_ns()
            batch = next(epoch, None)
            latencies.append(time.perf_counter_ns() - asked)
            if batch is None:
                latencies.pop()
                break
            int(batch["label"][0])  # look at the data
            del batch
    seconds = time.perf_counter() - start
    latencies.sort()
    print(json.dumps({
        "batches": len(latencies), "seconds": round(seconds, 3),
        "batches_per_s": round(len(latencies) / seconds, 1),
        "next_median_us": round(statistics.median(latencies) / 1000, 1),
        "next_p99_us": round(latencies[int(len(latencies) * 0.99)] / 1000, 1),
        "pss_mib": round(pss_mib(), 1),
        "torch_imported": "torch" in __import__("sys").modules}))


if __name__ == "__main__":
    main()
