"""ember.DeviceLoader: batches on a CUDA device, copied from the ring on a side stream.

Pure Python over ember.Loader and torch.cuda, so that it works with whichever CUDA torch is
imported (the extension module links no torch): the ring's mapping is page-locked once
with cudaHostRegister (through the CUDA runtime torch loaded), so each batch goes to the
GPU by DMA straight from its ring slot, as the C++ ember::DeviceLoader does.
"""

from __future__ import annotations

import collections
import ctypes
import os
import time
import warnings
from typing import Any, Deque, Dict, Iterator, Optional, Tuple

from . import _ember
from ._errors import FailedPrecondition, InvalidArgument
from ._loader import Batch, Loader


def _process_cudart() -> Optional[ctypes.CDLL]:
    """The CUDA runtime library this process has loaded (torch's), or None (a torch that
    links it statically). Its own copy: the last-error state a failed call leaves must
    be cleared in the runtime that torch checks."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                if len(fields) >= 6 and os.path.basename(fields[5]).startswith("libcudart.so"):
                    return ctypes.CDLL(fields[5])
    except OSError:
        pass
    return None


class _RingRegistration:
    """The ring's mapping page-locked for the GPU (cudaHostRegister), until close(); or,
    with `register` false or when registration fails, not (`error` says why)."""

    def __init__(self, address: int, size: int, register: bool) -> None:
        self.address, self.size = address, size
        self.error = ""
        self._cudart = _process_cudart() if register else None
        if not register:
            self.error = "ring registration is off (register_ring=False)"
            return
        if self._cudart is None:
            self.error = "no libcudart.so in this process (torch links the CUDA runtime statically)"
            return
        self._cudart.cudaGetErrorString.restype = ctypes.c_char_p
        code = self._cudart.cudaHostRegister(ctypes.c_void_p(address), ctypes.c_size_t(size),
                                             ctypes.c_uint(0))
        if code != 0:
            self._cudart.cudaGetLastError()  # not sticky: clear it, or torch's next check fails
            self.error = (f"cudaHostRegister of the ring ({size} bytes): error {code}: "
                          f"{self._cudart.cudaGetErrorString(code).decode()}")

    @property
    def ok(self) -> bool:
        return not self.error

    def close(self) -> None:
        if self.ok and self._cudart is not None:
            self._cudart.cudaHostUnregister(ctypes.c_void_p(self.address))
            self._cudart.cudaGetLastError()
            self.error = "unregistered"


class DeviceLoader:
    """As ``ember.Loader``, with each batch's tensors on ``cuda:<device>`` (default: the
    launcher's local rank).

    ``DeviceLoader(dataset, batch_size, *, device=None, register_ring=True, **options)``:
    options are ``ember.Loader``'s (seed, epochs, shuffle, job, rank, world_size, client,
    sample_ids, slots, coordinator, split, format, pipeline, on_error) but output (always
    torch) and reconnect_timeout (none: a reconnect maps a new ring).

    Each batch is copied to the device on a side stream, from the ring slot itself (the
    ring's mapping is registered with cudaHostRegister once) or, if registration fails or
    ``register_ring=False``, through torch's pinned memory (one more host copy);
    ``ring_registered`` says which. The returned tensors are ready on the stream that was
    current when the batch was taken (that stream waits for the copy; the caching
    allocator knows they are used there), so the copy overlaps the work already queued.
    A ring slot goes back to the daemon once its copy is done; the device tensors hold no
    ring memory. ``state_dict()``/``load_state_dict()`` and ``stats()`` as ``ember.Loader``'s
    (the state is that after the last batch returned). Needs a CUDA torch; errors raise
    ``ember.Error``.
    """

    def __init__(self, dataset: str, batch_size: int, *, device: Optional[int] = None,
                 register_ring: bool = True, **options: Any) -> None:
        for name in ("output", "reconnect_timeout"):
            if name in options:
                raise InvalidArgument(f"ember.DeviceLoader takes no {name} (see its doc)")
        try:
            import torch
        except ImportError:
            raise FailedPrecondition("ember.DeviceLoader needs torch with CUDA; torch does "
                                     "not import here") from None
        if not torch.cuda.is_available():
            raise FailedPrecondition(
                f"ember.DeviceLoader needs a CUDA device: torch {torch.__version__} sees none "
                f"(torch.cuda.is_available() is False; CUDA build: {torch.version.cuda})")
        if device is None:
            device = int(_ember.read_launch_env("")["local_rank"])
        count = torch.cuda.device_count()
        if not 0 <= device < count:
            raise InvalidArgument(f"ember.DeviceLoader: no device cuda:{device} (this process "
                                  f"sees {count})")
        self._torch = torch
        self.device = torch.device("cuda", device)
        self._loader = Loader(dataset, batch_size, output="torch", reconnect_timeout=0.0,
                              **options)
        self.dataset = self._loader.dataset
        self.epochs = self._loader.epochs
        self._register = register_ring
        self._registration: Optional[_RingRegistration] = None
        self._slots = 0
        self._stream = torch.cuda.Stream(self.device)
        # Batches whose copy may still read their ring slot: (event after it, host tensors).
        self._in_flight: Deque[Tuple[Any, Dict[str, Any]]] = collections.deque()
        self._copy_wait = 0.0

    def _open(self) -> None:
        if self._registration is not None:
            return
        native = self._loader._open()
        address, size, self._slots = native.ring
        self._registration = _RingRegistration(address, size, self._register)
        if self._register and not self._registration.ok:
            warnings.warn(f"ember.DeviceLoader ({self.device}): {self._registration.error}; "
                          f"copying batches through pinned memory instead", RuntimeWarning,
                          stacklevel=3)

    @property
    def ring_registered(self) -> bool:
        """True if copies come straight from the registered ring; else registration_error
        says why not."""
        self._open()
        return self._registration is not None and self._registration.ok

    @property
    def registration_error(self) -> str:
        self._open()
        return self._registration.error if self._registration is not None else ""

    def __iter__(self) -> Iterator[Batch]:
        self._open()
        epoch = iter(self._loader)  # raises here if the loader's epochs are over
        return (self._to_device(host) for host in epoch)

    def _to_device(self, host: Batch) -> Batch:
        torch = self._torch
        self._retire(keep=max(0, self._slots - 1))  # a slot left for the next batch
        current = torch.cuda.current_stream(self.device)
        registered = self._registration is not None and self._registration.ok
        with torch.cuda.stream(self._stream):
            # Ordered after what the trainer queued before taking this batch (it may still
            # be reading the memory these tensors reuse).
            self._stream.wait_stream(current)
            if registered:
                moved = {k: t.to(self.device, non_blocking=True) for k, t in host.items()}
            else:
                # torch's caching host allocator keeps a pinned block until the copies that
                # read it are done; the slot goes back at once.
                moved = {k: t.pin_memory().to(self.device, non_blocking=True)
                         for k, t in host.items()}
            copied = torch.cuda.Event()
            copied.record(self._stream)
        current.wait_event(copied)
        for tensor in moved.values():
            tensor.record_stream(current)
        batch = Batch(moved)
        batch.epoch, batch.step, batch.last = host.epoch, host.step, host.last
        if registered:
            self._in_flight.append((copied, dict(host)))
        host.clear()
        return batch

    def _retire(self, keep: int) -> None:
        """Hands back the slots whose copies are done, waiting until at most `keep` are
        still held."""
        while self._in_flight:
            event = self._in_flight[0][0]
            if not event.query():
                if len(self._in_flight) <= keep:
                    return
                began = time.monotonic()
                event.synchronize()
                self._copy_wait += time.monotonic() - began
            self._in_flight.popleft()

    def __len__(self) -> int:
        return len(self._loader)

    def state_dict(self) -> Dict[str, int]:
        return self._loader.state_dict()

    def load_state_dict(self, state_dict: Dict[str, int]) -> None:
        self._loader.load_state_dict(state_dict)

    def stats(self) -> Dict[str, float]:
        """ember.Loader's, and copy_wait_seconds: time spent waiting for a copy to finish
        before its slot could go back."""
        return dict(self._loader.stats(), copy_wait_seconds=self._copy_wait)

    def close(self) -> None:
        """Waits for the copies in flight, unregisters the ring and closes the stream.
        Tensors already returned stay valid."""
        if self._in_flight:
            self._stream.synchronize()
            self._in_flight.clear()
        if self._registration is not None:
            self._registration.close()
        self._loader.close()

    def __enter__(self) -> "DeviceLoader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass
