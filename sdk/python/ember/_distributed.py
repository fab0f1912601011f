"""torch.distributed bootstrapped through emberd: no MASTER_ADDR / MASTER_PORT needed."""

from __future__ import annotations

import datetime
import time
from typing import List, Optional, Union

import torch
import torch.distributed as dist

from . import _ember
from ._errors import DeadlineExceeded, InvalidArgument
from ._loader import default_run

# How long one wait for a key runs before Python gets to handle signals (Ctrl-C).
_WAIT_STEP_SECONDS = 1.0


class Store(dist.Store):
    """A ``torch.distributed.Store`` kept in emberd's rendezvous store of job ``job``
    (shared by the job's ranks on every node: through the coordinating daemon when the
    job spans nodes). Keys live under ``prefix``. Waits (get, wait) last at most
    ``timeout`` and raise ``ember.DeadlineExceeded`` naming the key after that."""

    def __init__(self, job: str, *, client: Optional[_ember.Client] = None,
                 prefix: str = "torch.distributed/",
                 timeout: datetime.timedelta = datetime.timedelta(minutes=30)) -> None:
        super().__init__()
        if not job:
            raise InvalidArgument("Store: job must not be empty")
        self.job = job
        self.prefix = prefix
        self.client = client if client is not None else _ember.Client()
        self._timeout = timeout.total_seconds()

    def _key(self, key: str) -> str:
        return self.prefix + key

    def set_timeout(self, timeout: datetime.timedelta) -> None:
        self._timeout = timeout.total_seconds()

    def set(self, key: str, value: Union[bytes, str]) -> None:
        if isinstance(value, str):
            value = value.encode()
        self.client.kv_set(self.job, self._key(key), bytes(value))

    def _get(self, key: str, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                return self.client.kv_get(self.job, self._key(key),
                                          max(0.0, min(left, _WAIT_STEP_SECONDS)))
            except DeadlineExceeded:
                if time.monotonic() >= deadline:
                    raise DeadlineExceeded(
                        f"key '{key}' of job '{self.job}' was not set within "
                        f"{timeout:g} s") from None

    def get(self, key: str) -> bytes:
        return self._get(key, self._timeout)

    def add(self, key: str, amount: int) -> int:
        return self.client.kv_add(self.job, self._key(key), int(amount))

    def check(self, keys: List[str]) -> bool:
        return self.client.kv_check(self.job, [self._key(k) for k in keys])

    def delete_key(self, key: str) -> bool:
        return self.client.kv_delete(self.job, self._key(key))

    def wait(self, keys: List[str],
             timeout: Optional[datetime.timedelta] = None) -> None:
        seconds = self._timeout if timeout is None else timeout.total_seconds()
        deadline = time.monotonic() + seconds
        for key in keys:
            self._get(key, max(0.0, deadline - time.monotonic()))

    def num_keys(self) -> int:
        raise NotImplementedError("ember.Store does not count keys")


def init_process_group(backend: Optional[str] = None, *, job: Optional[str] = None,
                       rank: Optional[int] = None, world_size: Optional[int] = None,
                       client: Optional[_ember.Client] = None,
                       timeout: datetime.timedelta = datetime.timedelta(minutes=30)) -> Store:
    """``torch.distributed.init_process_group`` with its rendezvous in emberd (an
    ``ember.Store``), so no MASTER_ADDR / MASTER_PORT is needed: ranks and job come from
    the launcher (ember-run, torchrun, Slurm) as for ``ember.Loader``. backend: "gloo",
    "nccl" (default: nccl if CUDA is available, else gloo). Keys of a run restarted by the
    launcher (its restart count) do not meet the previous attempt's. The job: ``job``, else
    the run's (``default_run``: under torchrun without ``--rdzv-id``, its store address).
    Returns the store.

    Under a launcher that sets none of ember-run's, torchrun's or Slurm's variables, pass
    rank and world_size. torch versions that refuse a store written in Python would need
    torch's own ``init_method="env://"`` (MASTER_ADDR, MASTER_PORT) instead; torch 1.13
    and 2.x accept it."""
    env = _ember.read_launch_env("")
    job = job or default_run(env)
    rank = env["rank"] if rank is None else rank
    world_size = env["world_size"] if world_size is None else world_size
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    store = Store(job, client=client,
                  prefix=f"torch.distributed/{env['restart_count']}/", timeout=timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                            timeout=timeout)
    return store


__all__ = ["Store", "init_process_group"]
