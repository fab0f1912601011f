"""PyTorch DDP + NVIDIA DALI (CPU operators) baseline of the image-training scenario: the
training of sdk/examples/python/train_images.py (Ember's example) with DALI's input pipeline.

Run with the bench venv's python (bench/setup-baselines prints it; nvidia-dali-cuda130, no
GPU needed):

  $PY bench/baselines/dali_images_train.py --train PHOTOS --val PHOTOS_VAL \
      [--ranks 2] [--epochs 2] [--batch-size 64] [--lr 3e-3] [--seed 0] [--threads N] \
      [--decode fused|full]

The model, optimizer, hyperparameters, seeding, timing, evaluation arithmetic, rank
processes (spawned; gloo at 127.0.0.1 and a free port; DDP) and the result line are those
of bench/baselines/dataloader_images_train.py, imported from it, which are
train_images.py's; only the data path differs. Each rank runs one DALI pipeline on the CPU
only (device_id=None: no CUDA context, no GPU memory), num_threads = cores / ranks (--threads;
DALI's threads are its CPU workers, so the ranks together use the machine's cores), DALI's
default prefetch queue (2), read through DALIGenericIterator (the documented
PyTorch plugin: reader_name="Reader", LastBatchPolicy.PARTIAL with the reader's
pad_last_batch=True, so every epoch gives each rank exactly its shard, the last batch
short, as the DataLoader does; auto_reset for the next epoch; prepare_first_batch=False so
that no decoding happens before the timed loop starts). exec_dynamic=False: DALI 2.4's
default (dynamic) executor makes DALIGenericIterator wrap its outputs under
`with torch.device(...)`, which torch 1.13 (Debian's, the torch of every row) does not
support ("'torch.device' object does not support the context manager protocol"); with
exec_dynamic=False, the documented switch back to the pipelined asynchronous executor, the
iterator copies each batch into a torch tensor instead (feed_ndarray). Measured here on
this pipeline (1 thread, batches of 64): 1.37-1.47 ms of CPU per image with the dynamic
executor, 1.38-1.40 without it: the switch costs DALI nothing. The two decode paths
below give the same crops (the same random draws from the same seed) and took the same
time here on the photos (300-500 px: little for region decoding to skip); the fused one
stays the default. Training, per rank:

  fn.readers.file(file_root=--train, shard_id=rank, num_shards=ranks, random_shuffle=True,
                  pad_last_batch=True)          # labels: sorted class folders, as ImageFolder
  --decode fused (default): fn.decoders.image_random_crop(device="cpu", output_type=RGB,
        random_area=[0.08, 1], random_aspect_ratio=[3/4, 4/3], num_attempts=10)
      + fn.resize(resize_x=224, resize_y=224, interp_type=INTERP_TRIANGULAR)
  --decode full: fn.decoders.image(device="cpu", output_type=RGB)
      + fn.random_resized_crop(size=224, the same area, ratio, attempts and filter)
  fn.crop_mirror_normalize(dtype=UINT8, output_layout="CHW",
                           mirror=fn.random.coin_flip(probability=0.5))

The fused decoder + resize is the training pipeline of DALI's own PyTorch ResNet-50 example
in its --dali_cpu mode, and DALI's documented fast path on the CPU (it decodes only the
crop's region with libjpeg-turbo); bench/baselines/dali_images.py measures the same
pipeline without training. --decode full decodes every pixel, then crops and resizes in one
operator. crop_mirror_normalize with a coin-flip mirror and CHW uint8 output is the same
operation as fn.flip(horizontal=coin_flip) followed by fn.transpose to CHW, in one pass
(as DALI's example and dali_images.py do). The pipeline seed is seed * 1000 + rank + 1
(dali_images.py's): the reader's shuffle and the crops of each rank are drawn from it.

Evaluation, per rank: fn.readers.file(file_root=--val, shard_id=rank, num_shards=ranks,
random_shuffle=False, pad_last_batch=True) -> fn.decoders.image -> fn.resize(resize_shorter=
256, INTERP_TRIANGULAR) -> fn.crop_mirror_normalize(crop=(224, 224), centred, uint8, CHW);
PARTIAL drops the padding, so each image of the folder is scored once. The training
pipeline is deleted first.

Prints, last, the same line as train_images.py:
  result: test_accuracy=0.4760 train_seconds=5.75 ranks=2
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dataloader_images_train as common  # noqa: E402  bench/baselines/, beside this file

SCALE = [0.08, 1.0]  # torchvision's RandomResizedCrop defaults (imagenet_train.yaml)
RATIO = [3 / 4, 4 / 3]


def _iterator(pipe):
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    return DALIGenericIterator([pipe], ["image", "label"], reader_name="Reader",
                               last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True,
                               prepare_first_batch=False)


def _batches(iterator):
    """One epoch of (images, labels): DALIGenericIterator copies each output into torch
    tensors of its own, valid after the next batch."""
    for data in iterator:
        yield data[0]["image"], data[0]["label"]


def run_rank(rank, args):
    """One rank: a DALI CPU pipeline (see the module docstring)."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=None,
                  seed=args.seed * 1000 + rank + 1, exec_dynamic=False)
    def train_pipeline():
        jpegs, labels = fn.readers.file(file_root=args.train, shard_id=rank,
                                        num_shards=args.ranks, random_shuffle=True,
                                        pad_last_batch=True, name="Reader")
        if args.decode == "fused":
            images = fn.decoders.image_random_crop(
                jpegs, device="cpu", output_type=types.RGB, random_area=SCALE,
                random_aspect_ratio=RATIO, num_attempts=10)
            images = fn.resize(images, resize_x=224, resize_y=224,
                               interp_type=types.INTERP_TRIANGULAR)
        else:
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.random_resized_crop(images, size=[224, 224], random_area=SCALE,
                                            random_aspect_ratio=RATIO, num_attempts=10,
                                            interp_type=types.INTERP_TRIANGULAR)
        images = fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW",
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=None,
                  seed=args.seed * 1000 + rank + 1, exec_dynamic=False)
    def eval_pipeline():
        jpegs, labels = fn.readers.file(file_root=args.val, shard_id=rank,
                                        num_shards=args.ranks, random_shuffle=False,
                                        pad_last_batch=True, name="Reader")
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_shorter=256, interp_type=types.INTERP_TRIANGULAR)
        images = fn.crop_mirror_normalize(images, crop=(224, 224), dtype=types.UINT8,
                                          output_layout="CHW")
        return images, labels

    # Built (the reader lists the folder) before the timed loop, as ImageFolder lists it
    # before the DataLoader's; decoding starts with the first batch asked for.
    state = {"train": _iterator(train_pipeline())}

    def train_epoch(_epoch):
        return _batches(state["train"])

    def free_training():
        del state["train"]

    def eval_batches():
        return _batches(_iterator(eval_pipeline()))

    return common.train_and_score(args, train_epoch, eval_batches, after_training=free_training)


def main(argv):
    p = common.parser(__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int,
                   help="DALI threads per rank (default: cores / ranks, at least 1)")
    p.add_argument("--decode", choices=["fused", "full"], default="fused",
                   help="fused: decoders.image_random_crop + resize (default); full: "
                        "decoders.image + random_resized_crop")
    args = p.parse_args(argv)
    if args.threads is None:
        args.threads = max(1, (os.cpu_count() or 1) // max(1, args.ranks))
    elif args.threads < 1:
        p.error("--threads must be >= 1")
    return common.spawn_ranks("dali_images_train", run_rank, common.check_args(p, args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
