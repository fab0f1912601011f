"""ember.DeviceLoader (CUDA builds of the module only): batches on a CUDA device."""

from __future__ import annotations

from typing import Any, Iterator, Optional

from . import _ember
from ._errors import FailedPrecondition, InvalidArgument
from ._loader import Batch, _Epoch, default_run

if not hasattr(_ember, "_DeviceLoader"):
    raise ImportError("this build of ember has no CUDA (build it with --config=cuda)")


class DeviceLoader:
    """As ``ember.Loader``, with each batch's tensors on ``cuda:<device>`` (default: the
    launcher's local rank), copied from the registered ring on a side stream; the batch is
    ready on the stream current when it was taken. No state_dict (use ember.Loader to
    checkpoint); errors raise ember.Error."""

    def __init__(self, dataset: str, batch_size: int, *, device: Optional[int] = None,
                 register_ring: bool = True, seed: int = 0, epochs: Optional[int] = None,
                 shuffle: bool = True, job: Optional[str] = None, rank: Optional[int] = None,
                 world_size: Optional[int] = None, client: Optional[_ember.Client] = None,
                 sample_ids: bool = False, slots: int = 0,
                 coordinator: Optional[str] = None) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgument(f"batch_size must be a positive int, not {batch_size!r}")
        env = _ember.read_launch_env("")
        self.epochs = epochs
        self.dataset = dataset
        client = client if client is not None else _ember.Client()
        self._native: Any = _ember._DeviceLoader(
            client, job or f"{default_run(env)}.{dataset}", dataset, batch_size, seed,
            env["rank"] if rank is None else rank,
            env["world_size"] if world_size is None else world_size,
            0 if epochs is None else epochs, shuffle, slots, sample_ids,
            env["coordinator"] if coordinator is None else coordinator,
            env["local_rank"] if device is None else device, register_ring)

    def __iter__(self) -> Iterator[Batch]:
        if self._native.ended:
            raise FailedPrecondition(f"the loader's {self.epochs} epochs of dataset "
                                     f"'{self.dataset}' are over")
        return _Epoch(self._native)

    def __len__(self) -> int:
        return int(self._native.batches_per_epoch)

    @property
    def ring_registered(self) -> bool:
        """True if copies come straight from the registered (pinned) ring."""
        return bool(self._native.ring_registered)
