#!/tmp/bvenv/bin/python
"""NVIDIA DALI's CPU pipeline as a peer of Ember in the images scenario (issue 15).

R rank processes (spawned together), each with one DALI pipeline on the CPU only
(device_id=None): fn.readers.file(file_root=DIR, shard_id=rank, num_shards=R,
random_shuffle=True) -> fn.decoders.image_random_crop(device="cpu") with the scale and
ratio of Ember's pipeline (configs/pipelines/imagenet_train.yaml; DALI's fused decode +
crop decodes only the crop's region with libjpeg-turbo) -> fn.resize to 224x224
(INTERP_TRIANGULAR, antialiased, as DALI's ResNet-50 example and Ember's resampler) ->
fn.crop_mirror_normalize(dtype=UINT8, output_layout=CHW, mirror=coin_flip(p)). num_threads
per rank: cores / R (DALI's threads are its CPU workers); prefetch_queue_depth: DALI's
default (2).

The consumer: each batch arrives as a torch uint8 tensor [B, 3, 224, 224] through DLPack
(torch.utils.dlpack.from_dlpack on DALI's contiguous output TensorCPU: no copy; the tensor
aliases DALI's output buffer, valid until the next run()), and is dropped, as Ember's
loader_bench readers do.

  /tmp/bvenv/bin/python bench/baselines/dali_images.py --folder DIR [--ranks 1]
      [--batch-size 64] [--seconds 10] [--warmup-seconds 1] [--threads N]

Prints one line per rank and `result: {json}` with system "dali-cpu" (image_ranks.py).
Needs the baseline venv (bench/setup-baselines: nvidia-dali-cuda130); no GPU.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import image_ranks  # noqa: E402  bench/baselines/image_ranks.py

SYSTEM = "dali-cpu"


def make_batches(rank, args):
    """The batches of rank `rank`: a generator of uint8 tensors that alias DALI's output."""
    import torch.utils.dlpack
    from nvidia.dali import fn, pipeline_def, types

    aug = args.augmentation

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=None,
                  seed=args.seed * 1000 + rank + 1)
    def images_pipeline():
        jpegs, labels = fn.readers.file(file_root=args.folder, shard_id=rank,
                                        num_shards=args.ranks, random_shuffle=True,
                                        name="reader")
        images = fn.decoders.image_random_crop(
            jpegs, device="cpu", output_type=types.RGB, random_area=list(aug.scale),
            random_aspect_ratio=list(aug.ratio), num_attempts=10)
        images = fn.resize(images, resize_x=aug.width, resize_y=aug.height,
                           interp_type=types.INTERP_TRIANGULAR)
        images = fn.crop_mirror_normalize(
            images, dtype=types.UINT8, output_layout=aug.layout,
            mirror=fn.random.coin_flip(probability=aug.flip_p))
        return images, labels

    pipe = images_pipeline()
    pipe.build()
    while True:
        images, _labels = pipe.run()
        yield torch.utils.dlpack.from_dlpack(images.as_tensor())


def main(argv):
    args = image_ranks.parse_args(__doc__.split("\n\n")[0], argv)
    return image_ranks.run(SYSTEM, make_batches, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
