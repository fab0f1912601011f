"""ember.Loader: a rank's batches from emberd as torch tensors (or numpy arrays, or
DLPack objects) viewing the shared ring."""

from __future__ import annotations

import hashlib
import os
import re
import sys
from typing import Any, Callable, Dict, Iterator, Optional, Union

from . import _ember
from ._errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound

_STATE_KEYS = ("fingerprint", "seed", "epoch", "position")


_OUTPUTS = ("torch", "numpy", "dlpack")
_IDX_FILES = ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte")


def detect_format(path: str) -> str:
    """The format of the data at `path`: a brace pattern ("shard-{000..099}.tar"), a .tar
    file, a directory of .tar shards or http(s):// or s3:// URLs of .tar shards are
    "webdataset" (an s3://BUCKET/PREFIX/ needs format="webdataset": the SDK lists nothing); an
    MDS index.json (a file or a URL), a directory holding one, or a directory whose
    subdirectories hold one are "mds" (Mosaic Streaming); a .parquet file, URL or brace
    pattern, or a directory of .parquet files, is "parquet"; another file is "tokens"; a
    directory holding a `manifest` is "packed" (emberctl pack), one holding MNIST-style IDX
    files is "idx", any other directory is an "imagefolder"."""
    if "://" in path:
        if path.endswith(".parquet"):
            return "parquet"
        if "{" in path or path.endswith(".tar"):
            return "webdataset"
        if path.endswith("/index.json"):
            return "mds"
        raise InvalidArgument(f"{path}: cannot tell the format of a URL that names no .tar "
                              f"shards, .parquet files nor an index.json; give format=")
    if path.endswith(".parquet") and ("{" in path or os.path.isfile(path)):
        return "parquet"
    if "{" in path or (path.endswith(".tar") and os.path.isfile(path)):
        return "webdataset"
    if os.path.basename(path) == "index.json" and os.path.isfile(path):
        return "mds"
    if os.path.isfile(path):
        return "tokens"
    if not os.path.isdir(path):
        raise NotFound(f"{path}: no such file or directory")
    names = set(os.listdir(path))
    if "manifest" in names:
        return "packed"
    if "index.json" in names:
        return "mds"
    if any(f in names or f + ".gz" in names for f in _IDX_FILES):
        return "idx"
    if any(name.endswith(".tar") for name in names):
        return "webdataset"
    if any(name.endswith(".parquet") for name in names):
        return "parquet"
    if any(os.path.isfile(os.path.join(path, name, "index.json")) for name in names):
        return "mds"
    return "imagefolder"


class _PathDataset:
    """A dataset given to a Loader by its path: registered for the user under a name made
    of the path and options (the same for every rank and run) on first use."""

    def __init__(self, path: str, format: Optional[str], split: str, pipeline: str,
                 on_error: str, shuffle: str = "samples", endpoint: str = "") -> None:
        self.path = path if "://" in path else os.path.realpath(path)
        self.format = format or detect_format(self.path)
        self.split, self.pipeline, self.on_error = split, pipeline, on_error
        self.shuffle, self.endpoint = shuffle, endpoint
        key = "\n".join((self.path, self.format, split, pipeline, on_error)
                        + ((shuffle,) if shuffle != "samples" else ())
                        + ((f"endpoint={endpoint}",) if endpoint else ())).encode()
        base = re.sub(r"[^A-Za-z0-9_.-]", "-", os.path.basename(self.path) or "data")[:40]
        self.name = f"{base.lstrip('.') or 'data'}.{split}-{hashlib.sha256(key).hexdigest()[:12]}"

    def register(self, client: Any) -> None:
        try:
            client.inspect_dataset(self.name)
            return
        except NotFound:
            pass
        try:
            client.add_dataset(self.name, self.path, format=self.format, split=self.split,
                               pipeline=self.pipeline, on_error=self.on_error,
                               shuffle=self.shuffle, endpoint=self.endpoint)
        except AlreadyExists:
            pass  # another rank registered it meanwhile
# Whether an output's converter takes DLPack capsules (else SlotTensors, __dlpack__).
_WANTS_CAPSULES = {"torch": True, "numpy": False, "dlpack": False}


def _default_output() -> str:
    """"torch" when torch imports, else "numpy"."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return "numpy"
    return "torch"


def _converter(output: str) -> Callable[[Any], Any]:
    """What makes a batch's tensor for `output` of what _Loader.next(capsules=
    _WANTS_CAPSULES[output]) gives (a capsule, or a SlotTensor): no copy."""
    if output == "torch":
        import torch
        try:  # torch.from_dlpack's C half (torch 1.10 to 2.x), without its Python checks
            from torch._C import _from_dlpack
            return _from_dlpack
        except ImportError:
            return torch.from_dlpack
    if output == "numpy":
        try:
            import numpy
        except ImportError:
            raise FailedPrecondition("batches as numpy arrays need numpy 1.22 or later, and "
                                     "as torch tensors torch: neither imports here (pip "
                                     "install numpy, or torch)") from None
        if not hasattr(numpy, "from_dlpack"):
            raise FailedPrecondition(f"output='numpy' needs numpy 1.22 or later "
                                     f"(numpy.from_dlpack); this is numpy {numpy.__version__}")
        return numpy.from_dlpack
    return lambda tensor: tensor


class Batch(dict):
    """One batch: tensor name -> CPU ``torch.Tensor`` ("image", "label", ...), each a
    view into the daemon's shared ring (no copy); with the loader's ``output="numpy"``,
    ``numpy.ndarray``s, with ``output="dlpack"``, DLPack objects (``__dlpack__``) for any
    other consumer.

    The batch holds one ring slot. The slot goes back to the daemon when the last of its
    tensors (and of what was made of them) is freed, or with ``release()`` or at the end
    of a ``with`` block::

        for batch in loader:
            with batch:
                loss = step(batch["image"], batch["label"])

    ``epoch``: the epoch it belongs to; ``step``: its global step in the epoch (the same
    step on every rank), counted from where the loader started (a loader resumed
    mid-epoch from a state_dict() starts at step 0); ``last``: whether it is this rank's
    last batch of the epoch.
    """

    __slots__ = ("epoch", "step", "last")

    def release(self) -> None:
        """Empties the batch and hands its ring slot back, now if nothing else refers to
        its tensors. A torch tensor of it still referenced elsewhere (a variable) gets a
        private copy of its data first and keeps working; a view made of one (a slice),
        or a kept numpy array, keeps the slot until it is freed, so its data never
        changes under it."""
        tensors = list(self.values())
        self.clear()
        for tensor in tensors:
            # `tensors`, the loop's name and getrefcount's argument: anything more is a
            # reference of the caller's.
            if (sys.getrefcount(tensor) > 3 and type(tensor).__module__.startswith("torch")
                    and not tensor.is_cuda):  # (DeviceLoader's hold no slot)
                tensor.set_(tensor.clone())
        del tensors

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {tuple(v.shape)} {getattr(v, 'dtype', 'dlpack')}"
                           for k, v in self.items())
        return f"Batch(epoch={self.epoch}, step={self.step}, {{{shapes}}})"


class _Epoch:
    """Iterates the batches of the loader's current epoch (keeps no batch itself)."""

    def __init__(self, native: Any, convert: Callable[[Any], Any] = lambda t: t,
                 capsules: bool = False, wait_meter: Any = None) -> None:
        self._native = native
        self._convert = convert
        self._capsules = capsules
        self._wait_meter = wait_meter  # begin() / end() around each wait (ember.train)

    def __iter__(self) -> "_Epoch":
        return self

    def __next__(self) -> Batch:
        if self._native is None:
            raise StopIteration
        if self._wait_meter is not None:
            self._wait_meter.begin()
        try:
            item = self._native.next(True) if self._capsules else self._native.next()
        finally:
            if self._wait_meter is not None:
                self._wait_meter.end()
        if item is None:
            self._native = None
            raise StopIteration
        batch = Batch({name: self._convert(t) for name, t in item[0].items()})
        batch.epoch, batch.step, batch.last = item[1], item[2], item[3]
        return batch


class Loader:
    """The batches of one rank of a training job, served by the local emberd.

    ``Loader(dataset, batch_size, *, seed=0, epochs=None, shuffle=True, job=None,
    rank=None, world_size=None, client=None, output=None)``

    dataset: a registered dataset's name, or a path (with a "/") to data in any format
    emberd reads, registered for the user on first use under a name made of the path and
    the options (format: detected, see ``detect_format``; split, pipeline, on_error as
    ``Client.add_dataset`` takes them). shuffle: True, False, or "shards" for a dataset
    given by path whose shards are read from remote storage (registered with
    ``shuffle="shards"``: shards permuted each epoch, samples mixed within a window of
    shards, so the node's cache reads each shard once per epoch). endpoint: for an s3://
    path, the S3 endpoint "http(s)://HOST[:PORT]" its objects are read from (default:
    emberd's; region and credentials stay emberd's own).

    Iterating the loader yields one epoch of this rank's batches as ``Batch`` dicts of
    tensors (views into the ring, no copy); the next iteration yields the next epoch. The
    epoch's order is a function of (seed, epoch) only: step s of the epoch takes the next
    batch_size x world_size samples of its permutation and rank r gets slice r, so every
    sample is served once per epoch across all ranks, and every rank gets ``len(loader)``
    batches.

    rank, world_size and job default to the launcher's (ember-run, torchrun, Slurm; see
    ``ember.launch_env()``; the job: "<run>.<dataset>", see ``default_run``). Without a
    launcher the loader is rank 0 of 1 in a job of its own. epochs: the run's epochs, numbered from 0 (None: until the loader is closed); a
loader resumed from a state_dict() starts at the state's epoch. client: an
    ``ember.Client`` (default: one connected to $EMBER_SOCKET). output: what a batch
    holds, each a view into the ring (no copy): "torch" tensors (the default when torch
    imports; torch 1.10 and later), "numpy" arrays (numpy 1.22 and later) or "dlpack"
    objects (``__dlpack__``/``__dlpack_device__``, for JAX, CuPy and the like).

    share: a share group's name (None: none). Jobs on the node that read the same dataset
    with the same seed and pipeline and give the same share name (the same user's, or
    anyone's for a shared dataset) are served by one producer: each sample is decoded once
    for all of them, and each job gets every batch of the group's common order. Their
    batches' tensors may then view the group's memory, which is read-only: clone a tensor
    before changing it in place.

    Checkpoint and resume with ``state_dict()`` / ``load_state_dict()`` (the
    StatefulDataLoader convention), also onto another world size or batch size. If the
    daemon restarts, the loader reconnects for up to ``reconnect_timeout`` seconds and
    continues after the last batch it returned. Errors raise ``ember.Error`` subclasses
    with the daemon's message; Ctrl-C interrupts a wait for a batch.
    """

    def __init__(self, dataset: str, batch_size: int, *, seed: int = 0,
                 epochs: Optional[int] = None, shuffle: Union[bool, str] = True,
                 job: Optional[str] = None, rank: Optional[int] = None,
                 world_size: Optional[int] = None, client: Optional[_ember.Client] = None,
                 sample_ids: bool = False, slots: int = 0,
                 coordinator: Optional[str] = None, reconnect_timeout: float = 60.0,
                 output: Optional[str] = None, split: str = "train",
                 format: Optional[str] = None, pipeline: str = "",
                 on_error: str = "fail", endpoint: str = "",
                 share: Optional[str] = None) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgument(f"batch_size must be a positive int, not {batch_size!r}")
        if epochs is not None and (not isinstance(epochs, int) or epochs < 1):
            raise InvalidArgument(f"epochs must be a positive int or None, not {epochs!r}")
        if share is not None and not isinstance(share, str):
            raise InvalidArgument(f"share must be a share group's name (a str) or None, "
                                  f"not {share!r}")
        if output is None:
            output = _default_output()
        if output not in _OUTPUTS:
            raise InvalidArgument(f"output must be one of {', '.join(_OUTPUTS)}, not {output!r}")
        self.output = output
        self._convert = _converter(output)
        self._path: Optional[_PathDataset] = None
        if shuffle not in (True, False, "shards"):
            raise InvalidArgument(f"shuffle must be True, False or 'shards', not {shuffle!r}")
        if shuffle == "shards" and "/" not in dataset:
            raise InvalidArgument(f"shuffle='shards' is for a dataset given by path; register "
                                  f"'{dataset}' with shuffle='shards' instead")
        if "/" in dataset:
            self._path = _PathDataset(dataset, format, split, pipeline, on_error,
                                      "shards" if shuffle == "shards" else "samples", endpoint)
            dataset = self._path.name
            shuffle = bool(shuffle)
        elif (split, format, pipeline, on_error, endpoint) != ("train", None, "", "fail", ""):
            raise InvalidArgument(f"split, format, pipeline, on_error and endpoint are for a "
                                  f"dataset given by path; '{dataset}' is registered with its own")
        env = _ember.read_launch_env("")
        if job is None:
            job = f"{default_run(env)}.{dataset}"
        self.dataset = dataset
        self.batch_size = batch_size
        self.seed = seed
        self.epochs = epochs
        self.shuffle = shuffle
        self.job = job
        self.rank = env["rank"] if rank is None else rank
        self.world_size = env["world_size"] if world_size is None else world_size
        self.sample_ids = sample_ids
        self.slots = slots
        self.coordinator = env["coordinator"] if coordinator is None else coordinator
        self.share = share or None
        self.reconnect_timeout = reconnect_timeout
        self._client = client
        self._resume: Optional[_ember.LoaderState] = None
        self._native: Any = None
        self._wait_meter: Any = None

    def _open(self) -> Any:
        if self._native is None:
            if self._client is None:
                self._client = _ember.Client()
            if self._path is not None:
                self._path.register(self._client)
            self._native = _ember._Loader(
                self._client, self.job, self.dataset, self.batch_size, self.seed, self.rank,
                self.world_size, 0 if self.epochs is None else self.epochs, self.shuffle,
                self.slots, self.sample_ids, self.coordinator, self._resume,
                self.reconnect_timeout, share=self.share or "")
            if self.epochs is not None and self._native.end_epoch > self.epochs:
                # A new job that joined its share group late starts at the group's next
                # epoch: its epochs are numbered as the group's (state_dict() too).
                self.epochs = int(self._native.end_epoch)
        return self._native

    def _over(self, epoch: int) -> bool:
        return self.epochs is not None and epoch >= self.epochs

    def __iter__(self) -> Iterator[Batch]:
        # A state saved at the end of the last epoch resumes nothing (opens no stream).
        resumed_at_end = (self._native is None and self._resume is not None and
                          self._over(self._resume.epoch))
        if resumed_at_end or self._open().ended or self._over(self._native.state.epoch):
            raise FailedPrecondition(
                f"the loader's {self.epochs} epochs of dataset '{self.dataset}' are over "
                f"(job '{self.job}' rank {self.rank}); make a Loader with more epochs")
        return _Epoch(self._native, self._convert, _WANTS_CAPSULES[self.output],
                      self._wait_meter)

    def __len__(self) -> int:
        """Batches per epoch for this rank (the same on every rank)."""
        return int(self._open().batches_per_epoch)

    def state_dict(self) -> Dict[str, int]:
        """Where the job stands after the last batch this loader returned: the dataset's
        fingerprint, the seed, the epoch and the positions of it consumed. Save it with the
        model; every rank's is the same after an optimizer step."""
        if self._native is not None:
            state = self._native.state
        elif self._resume is not None:
            state = self._resume
        else:
            return {"fingerprint": 0, "seed": self.seed, "epoch": 0, "position": 0}
        return {key: int(getattr(state, key)) for key in _STATE_KEYS}

    def load_state_dict(self, state_dict: Dict[str, int]) -> None:
        """Resumes from a ``state_dict()``: the loader then serves exactly the samples not
        yet consumed, also with another world size or batch size. Call it before the
        loader is first iterated (or measured with len())."""
        if self._native is not None:
            raise FailedPrecondition(
                "load_state_dict must come before the loader is first iterated or measured "
                "(len): its stream is already open")
        missing = [key for key in _STATE_KEYS if key not in state_dict]
        if missing:
            raise InvalidArgument(f"loader state {state_dict!r} has no {', '.join(missing)}")
        try:
            values = {key: int(state_dict[key]) for key in _STATE_KEYS}
        except (TypeError, ValueError) as e:
            raise InvalidArgument(f"loader state {state_dict!r}: {e}") from None
        if values["seed"] != self.seed:
            raise InvalidArgument(f"the loader state is of seed {values['seed']}, the "
                                  f"loader's seed is {self.seed}")
        self._resume = _ember.LoaderState(**values)

    def stats(self) -> Dict[str, float]:
        """data_stall_seconds: time spent waiting for the daemon; batches: taken so far;
        reconnects: times the stream was opened again after losing the daemon."""
        if self._native is None:
            return {"data_stall_seconds": 0.0, "batches": 0, "reconnects": 0}
        return {"data_stall_seconds": self._native.wait_seconds,
                "batches": self._native.batches_read, "reconnects": self._native.reconnects}

    def close(self) -> None:
        """Closes the stream (batches still held stay valid)."""
        self._native = None

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def default_run(env: Dict[str, Any]) -> str:
    """The name of this run when the caller gives none: the launcher's job (EMBER_JOB,
    TORCHELASTIC_RUN_ID, SLURM_JOB_ID); under torchrun without a run id, its store's address
    (the same for every rank of one torchrun); for a process started by hand,
    "python-<pid>". A Loader's default job is "<run>.<dataset>", the default store's
    (init_process_group) "<run>"."""
    if env["job"]:
        return env["job"]
    if env["launcher"] == "torchrun" and env["master_addr"]:
        return f"torchrun-{env['master_addr']}:{os.environ.get('MASTER_PORT', '')}"
    return f"python-{os.getpid()}"


def launch_env() -> Dict[str, Any]:
    """Rank, world size, local rank, node, restart count and job as the launcher set them
    (ember-run's EMBER_*, else torchrun's, else Slurm's; a process started by hand is rank
    0 of 1)."""
    return dict(_ember.read_launch_env(""))


__all__ = ["Batch", "Loader", "default_run", "detect_format", "launch_env"]
