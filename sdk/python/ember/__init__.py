"""Ember: data for PyTorch distributed training, served by emberd.

    import ember
    loader = ember.Loader("fmnist-train", batch_size=64, epochs=2)   # rank, job: launcher's
    for epoch in range(2):
        for batch in loader:                     # dict of tensors, views into the ring
            x, y = batch["image"], batch["label"]

``ember.init_process_group("gloo")`` bootstraps torch.distributed through emberd.
``ember.Client`` registers and inspects datasets as emberctl does. Errors are
``ember.Error`` subclasses carrying the daemon's message.
"""

import torch  # noqa: F401  (loads libtorch and its Python bindings before _ember)

from ._ember import (Client, DaemonStatus, DatasetInfo, JobStatus, LoaderState,
                     PendingSegmentStatus, RankProgress, StreamStatus, TensorInfo)
from ._errors import (AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, Error,
                      FailedPrecondition, Internal, InvalidArgument, NotFound,
                      PermissionDenied, ResourceExhausted, Unavailable)
from ._loader import Batch, Loader, launch_env
from ._distributed import Store, init_process_group

try:
    from ._device import DeviceLoader  # noqa: F401  (CUDA builds only)
except ImportError:
    pass

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists", "Batch", "Cancelled", "Client", "DaemonStatus", "DataLoss",
    "DatasetInfo", "DeadlineExceeded", "Error", "FailedPrecondition", "Internal",
    "InvalidArgument", "JobStatus", "Loader", "LoaderState", "NotFound",
    "PendingSegmentStatus", "PermissionDenied", "RankProgress", "ResourceExhausted",
    "Store", "StreamStatus", "TensorInfo", "Unavailable", "init_process_group",
    "launch_env",
]
