"""What the image-scenario peers (dali_images.py, spdl_images.py) share: the command line,
the augmentation read from Ember's pipeline YAML, the ImageFolder file list, and R rank
processes that pull batches like Ember's loader_bench readers (receive each batch as a
torch uint8 tensor and do nothing else): `warmup` seconds first, then all ranks measure
together for `seconds`.

Output: one line per rank, then exactly one line
  result: {"system", "ranks", "batch_size", "threads", "images", "seconds", "images_per_s",
           "cpu_s", "cpu_s_per_image"}
images: received after warm-up by all ranks; seconds: the longest rank's measured time;
images_per_s: the sum over ranks of images / measured seconds; cpu_s: the ranks' CPU time
(all their threads: time.process_time) over the measured window only.
"""

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass

import multiprocessing as mp

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH)
import rank_results  # noqa: E402  bench/rank_results.py

DEFAULT_PIPELINE = os.path.join(os.path.dirname(BENCH), "configs", "pipelines",
                                "imagenet_train.yaml")
# torchvision's IMG_EXTENSIONS, as ImageFolder and Ember's imagefolder format read them.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class Augmentation:
    """RandomResizedCrop(size, scale, ratio) then a horizontal flip with probability
    flip_p, output uint8 in `layout` ("CHW" or "HWC")."""
    height: int
    width: int
    scale: tuple
    ratio: tuple
    flip_p: float
    layout: str

    def batch_shape(self, batch_size):
        if self.layout == "CHW":
            return (batch_size, 3, self.height, self.width)
        return (batch_size, self.height, self.width, 3)


def read_augmentation(path):
    """The Augmentation of an Ember pipeline YAML made of exactly a random_resized_crop
    and a horizontal_flip step with uint8 output (configs/pipelines/imagenet_train.yaml);
    exits naming the file and what is not supported otherwise."""
    import yaml
    try:
        with open(path, encoding="utf-8") as f:
            spec = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as err:
        sys.exit(f"{path}: cannot read the pipeline: {err}")
    steps = [(name, args or {}) for step in spec.get("steps", []) for name, args in step.items()]
    names = [name for name, _ in steps]
    if names != ["random_resized_crop", "horizontal_flip"]:
        sys.exit(f"{path}: the peers implement steps [random_resized_crop, horizontal_flip], "
                 f"not {names}")
    output = spec.get("output") or {}
    if output.get("dtype", "uint8") != "uint8":
        sys.exit(f"{path}: the peers implement output dtype uint8, not {output['dtype']}")
    crop, flip = steps[0][1], steps[1][1]
    size = crop["size"]
    height, width = (size, size) if isinstance(size, int) else size
    return Augmentation(height=height, width=width,
                        scale=tuple(crop.get("scale", (0.08, 1.0))),
                        ratio=tuple(crop.get("ratio", (3 / 4, 4 / 3))),
                        flip_p=float(flip.get("p", 0.5)),
                        layout=output.get("layout", "CHW"))


def list_image_folder(root):
    """(paths, labels) of an ImageFolder tree: class folders in sorted order, their image
    files in sorted order, as torchvision's ImageFolder lists them."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    paths, labels = [], []
    for label, name in enumerate(classes):
        for dirpath, _, files in sorted(os.walk(os.path.join(root, name))):
            for file in sorted(files):
                if file.lower().endswith(IMAGE_EXTENSIONS):
                    paths.append(os.path.join(dirpath, file))
                    labels.append(label)
    if not paths:
        sys.exit(f"{root}: no image files in class folders")
    return paths, labels


def parse_args(description, argv):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--folder", required=True, help="ImageFolder tree (class folders)")
    parser.add_argument("--ranks", type=int, default=1, help="rank processes (default 1)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="measured seconds after the warm-up (default 10)")
    parser.add_argument("--warmup-seconds", type=float, default=1.0)
    parser.add_argument("--threads", type=int,
                        help="worker threads per rank (default: cores / ranks, at least 1)")
    parser.add_argument("--pipeline", default=DEFAULT_PIPELINE,
                        help=f"Ember pipeline YAML to mirror (default {DEFAULT_PIPELINE})")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.ranks < 1 or args.batch_size < 1 or args.seconds <= 0 or args.warmup_seconds < 0:
        parser.error("--ranks and --batch-size must be >= 1, --seconds > 0, --warmup-seconds >= 0")
    if not os.path.isdir(args.folder):
        parser.error(f"--folder {args.folder}: not a directory")
    if args.threads is None:
        args.threads = max(1, (os.cpu_count() or 1) // args.ranks)
    elif args.threads < 1:
        parser.error("--threads must be >= 1")
    args.augmentation = read_augmentation(args.pipeline)
    return args


def _run_rank(rank, args, make_batches, barrier, results):
    batches = None
    try:
        batches = make_batches(rank, args)
        expected = args.augmentation.batch_shape(args.batch_size)

        def next_batch():
            images = next(batches)
            if tuple(images.shape) != expected or str(images.dtype) != "torch.uint8":
                raise RuntimeError(f"rank {rank}: got a batch of {tuple(images.shape)} "
                                   f"{images.dtype}, expected {expected} torch.uint8")
            return images

        next_batch()
        warmup_end = time.perf_counter() + args.warmup_seconds
        while time.perf_counter() < warmup_end:
            next_batch()
        barrier.wait(timeout=300)

        images = count = 0
        cpu_start = time.process_time()
        start = time.perf_counter()
        deadline = start + args.seconds
        while True:
            images += next_batch().shape[0]
            count += 1
            now = time.perf_counter()
            if now >= deadline:
                break
        cpu = time.process_time() - cpu_start
        results.put(("ok", rank, images, count, now - start, cpu))
    except BaseException:  # reported to the parent, which fails the run
        results.put(("error", rank, traceback.format_exc()))
        barrier.abort()
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def run(system, make_batches, args):
    """Runs args.ranks processes, each pulling from make_batches(rank, args) (a
    module-level function returning an iterator of uint8 image batch tensors of
    args.augmentation.batch_shape(args.batch_size); it may hold the batch only until the
    next one is asked for), and prints the rank lines and the result line. Returns the
    exit status."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(args.ranks)
    results = ctx.Queue()
    procs = [ctx.Process(target=_run_rank, args=(r, args, make_batches, barrier, results))
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    per_rank, failure = rank_results.gather(
        results, procs, timeout_s=args.seconds + args.warmup_seconds + 600)
    if failure is not None:
        print(f"{system}: error: {failure}", file=sys.stderr)
        return 1
    images = 0
    rate = cpu = seconds = 0.0
    for rank in sorted(per_rank):
        rank_images, count, rank_seconds, rank_cpu = per_rank[rank]
        print(f"rank {rank}: images={rank_images} batches={count} seconds={rank_seconds:.3f} "
              f"images_per_s={rank_images / rank_seconds:.1f} cpu_s={rank_cpu:.2f}")
        images += rank_images
        rate += rank_images / rank_seconds
        cpu += rank_cpu
        seconds = max(seconds, rank_seconds)
    print("result: " + json.dumps({
        "system": system, "ranks": args.ranks, "batch_size": args.batch_size,
        "threads": args.threads, "images": images, "seconds": round(seconds, 3),
        "images_per_s": round(rate, 1), "cpu_s": round(cpu, 2),
        "cpu_s_per_image": round(cpu / images, 6)}))
    return 0
