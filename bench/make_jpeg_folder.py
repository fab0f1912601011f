#!/usr/bin/python3
"""Writes an ImageFolder tree of real JPEGs for the image-pipeline benchmarks.

Source: Fashion-MNIST (Debian's dataset-fashion-mnist) — real photographs of clothing,
28x28 grayscale. Each image is upscaled (bicubic) to SIZE x SIZE, tinted into RGB with a
per-class colour so the three channels differ, and saved as a JPEG (quality 90) under
OUT/<class name>/<index>.jpg. With the defaults: 2,000 images of 256x256, about 6 KB
each (smooth upscaled content compresses well), 10 class folders.

  bench/make_jpeg_folder.py OUT [--count 2000] [--size 256]
"""

import argparse
import gzip
import os
import struct
import sys

import numpy as np
from PIL import Image

DATA = "/usr/share/datasets/fashion-mnist"
CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
           "bag", "ankle-boot"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    _, _, ndim = struct.unpack(">HBB", data[:4])
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args()
    images = read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"))
    if args.count > len(images):
        sys.exit(f"make_jpeg_folder: --count {args.count} is more than the {len(images)} images")
    rng = np.random.default_rng(0)
    tints = rng.uniform(0.5, 1.0, size=(len(CLASSES), 3))
    for name in CLASSES:
        os.makedirs(os.path.join(args.out, name), exist_ok=True)
    total = 0
    for i in range(args.count):
        label = int(labels[i])
        gray = Image.fromarray(images[i]).resize((args.size, args.size), Image.BICUBIC)
        rgb = (np.asarray(gray, dtype=np.float32)[:, :, None] * tints[label]).astype(np.uint8)
        path = os.path.join(args.out, CLASSES[label], f"{i:06d}.jpg")
        Image.fromarray(rgb, "RGB").save(path, quality=90)
        total += os.path.getsize(path)
    print(f"make_jpeg_folder: wrote {args.count} JPEGs of {args.size}x{args.size} "
          f"({total / args.count / 1024:.1f} KB each) under {args.out}")


if __name__ == "__main__":
    main()
