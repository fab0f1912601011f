#!/usr/bin/python3
"""Writes an ImageFolder tree of real photographs for the realistic image benchmark.

Source: the 12 nature photographs of Debian's `mate-backgrounds` package
(/usr/share/backgrounds/mate/nature/*.jpg: flowers, leaves, grass, water, a dune, a storm,
wood; 1280x1024 to 2560x1920; GPL-2+, authors in /usr/share/doc/mate-backgrounds/copyright).
Install it with `apt-get install mate-backgrounds`.

Each output image is a crop of W x H pixels, W and H drawn uniformly and independently
from [MIN, MAX] (300-500 by default), at a uniformly random position in a photo drawn at
random, saved as a JPEG (quality 90, 4:2:0 as PIL writes it) under
OUT/<photo name>/<index>.jpg: one class per source photo. The same --seed gives the same
files. Unlike the Fashion-MNIST folder (bench/make_jpeg_folder.py: 28x28 images upscaled
to 256x256, ~6 KB), these carry camera texture and noise: ~20 KB each (4-80 KB; the
photos' out-of-focus areas compress well).

  bench/make_photo_folder.py OUT [--count 2000] [--seed 0] [--min-size 300] [--max-size 500]
"""

import argparse
import glob
import os
import random
import sys

from PIL import Image

PACKAGE = "mate-backgrounds"
SOURCE_GLOB = "/usr/share/backgrounds/mate/nature/*.jpg"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-size", type=int, default=300)
    parser.add_argument("--max-size", type=int, default=500)
    args = parser.parse_args()
    if args.count < 1 or not 1 <= args.min_size <= args.max_size:
        parser.error("--count must be >= 1 and 1 <= --min-size <= --max-size")

    paths = sorted(glob.glob(SOURCE_GLOB))
    if not paths:
        sys.exit(f"make_photo_folder: no photographs at {SOURCE_GLOB}: install the Debian "
                 f"package {PACKAGE} (apt-get install {PACKAGE})")
    photos = []
    for path in paths:
        with Image.open(path) as image:
            photo = image.convert("RGB")
        if min(photo.size) < args.max_size:
            sys.exit(f"make_photo_folder: {path} is {photo.size[0]}x{photo.size[1]}, smaller "
                     f"than --max-size {args.max_size}")
        photos.append((os.path.splitext(os.path.basename(path))[0].lower(), photo))

    for name, _ in photos:
        os.makedirs(os.path.join(args.out, name), exist_ok=True)
    rng = random.Random(args.seed)
    total = 0
    for i in range(args.count):
        name, photo = photos[rng.randrange(len(photos))]
        width = rng.randint(args.min_size, args.max_size)
        height = rng.randint(args.min_size, args.max_size)
        x = rng.randint(0, photo.size[0] - width)
        y = rng.randint(0, photo.size[1] - height)
        path = os.path.join(args.out, name, f"{i:06d}.jpg")
        photo.crop((x, y, x + width, y + height)).save(path, quality=90)
        total += os.path.getsize(path)
    print(f"make_photo_folder: wrote {args.count} JPEGs of {args.min_size}-{args.max_size} px "
          f"({total / args.count / 1024:.1f} KB each) from {len(photos)} photos of {PACKAGE} "
          f"under {args.out}")


if __name__ == "__main__":
    main()
