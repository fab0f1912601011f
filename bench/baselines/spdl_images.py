#!/tmp/bvenv/bin/python
"""SPDL (spdl.io + spdl.pipeline) as a peer of Ember in the images scenario (issue 15).

R rank processes (spawned together). Each lists the ImageFolder tree as torchvision does,
takes its shard of a permutation drawn per epoch (DistributedSampler's split: the same
permutation on every rank, rank r keeps positions r, r + R, ...), and runs SPDL's
multi-threaded (MT) pipeline, the shape of SPDL's image_dataloading example and of its
"Execution Models" guide:

  add_source(shard, continuous=True) -> aggregate(B, drop_last=True)
    -> pipe(decode_batch, concurrency=T) -> add_sink(3, SPDL's default) -> build(num_threads=T)

decode_batch, per image: spdl.io.demux_image, then RandomResizedCrop's box drawn as
torchvision draws it (scale and ratio of Ember's configs/pipelines/imagenet_train.yaml,
10 attempts, centre-crop fallback; from a per-image seed) and the flip, both applied by
an FFmpeg filter in spdl.io.decode_packets as SPDL's augmentation guide does it:
  crop=w=W:h=H:x=X:y=Y,scale=w=224:h=224:flags=bilinear[,hflip],format=pix_fmts=rgb24
(the crop before the RGB conversion, as the guide advises; bilinear: swscale's filter
widens when shrinking, as Ember's triangle filter), then one spdl.io.convert_frames for
the batch and spdl.io.to_torch (no copy). T (threads = stage concurrency, as SPDL's
concurrency guide pairs them) per rank: cores / R.

The consumer: each batch arrives as a torch uint8 tensor of Ember's shape [B, 3, 224, 224];
SPDL's frames are packed RGB (convert_frames has no planar RGB), so it is the [B, 224,
224, 3] buffer seen through permute(0, 3, 1, 2), as SPDL's ImageNet example hands its batch
to the model (a view, not contiguous). The rank drops it, as Ember's loader_bench readers do.

  /tmp/bvenv/bin/python bench/baselines/spdl_images.py --folder DIR [--ranks 1]
      [--batch-size 64] [--seconds 10] [--warmup-seconds 1] [--threads N]

Prints one line per rank and `result: {json}` with system "spdl" (image_ranks.py).
Needs the baseline venv (bench/setup-baselines: spdl) and FFmpeg's shared libraries
(Debian 12: libavdevice59, libavfilter8, libswscale6).
"""

import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import image_ranks  # noqa: E402  bench/baselines/image_ranks.py

SYSTEM = "spdl"
SINK_BUFFER = 3  # PipelineBuilder.add_sink's default


def random_resized_crop_box(width, height, scale, ratio, rng):
    """(left, top, w, h) as torchvision's RandomResizedCrop.get_params draws them."""
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        w, h = int(round(height * max(ratio))), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


class ShardSource:
    """Rank `rank`'s (path, label, seed) items, one epoch per iter() (a continuous
    source: SPDL iterates it again for each epoch)."""

    def __init__(self, paths, labels, rank, ranks, seed):
        self.paths, self.labels = paths, labels
        self.rank, self.ranks, self.seed = rank, ranks, seed
        self.per_rank = len(paths) // ranks
        self.epoch = 0

    def __iter__(self):
        order = list(range(len(self.paths)))
        random.Random(self.seed * 100003 + self.epoch).shuffle(order)
        epoch = self.epoch
        self.epoch += 1
        for i in order[self.rank::self.ranks][:self.per_rank]:
            yield self.paths[i], self.labels[i], (self.seed, epoch, i)


def make_decode_batch(aug):
    import spdl.io
    import torch

    def decode_batch(items):
        frames = []
        for path, _, seed in items:
            packets = spdl.io.demux_image(path)
            rng = random.Random(hash(seed))
            x, y, w, h = random_resized_crop_box(packets.width, packets.height, aug.scale,
                                                 aug.ratio, rng)
            flip = ",hflip" if rng.random() < aug.flip_p else ""
            frames.append(spdl.io.decode_packets(
                packets, filter_desc=f"crop=w={w}:h={h}:x={x}:y={y},"
                f"scale=w={aug.width}:h={aug.height}:flags=bilinear{flip},"
                "format=pix_fmts=rgb24"))
        images = spdl.io.to_torch(spdl.io.convert_frames(frames))
        if aug.layout == "CHW":
            images = images.permute(0, 3, 1, 2)
        return images, torch.tensor([label for _, label, _ in items])

    return decode_batch


def make_batches(rank, args):
    """The batches of rank `rank`: a generator of uint8 image tensors."""
    from spdl.pipeline import PipelineBuilder

    paths, labels = image_ranks.list_image_folder(args.folder)
    pipeline = (
        PipelineBuilder()
        .add_source(ShardSource(paths, labels, rank, args.ranks, args.seed), continuous=True)
        .aggregate(args.batch_size, drop_last=True)
        .pipe(make_decode_batch(args.augmentation), concurrency=args.threads)
        .add_sink(SINK_BUFFER)
        .build(num_threads=args.threads)
    )
    with pipeline.auto_stop():
        while True:
            for images, _labels in pipeline.get_iterator():
                yield images


def main(argv):
    args = image_ranks.parse_args(__doc__.split("\n\n")[0], argv)
    return image_ranks.run(SYSTEM, make_batches, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
