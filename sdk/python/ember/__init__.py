"""Ember: data for PyTorch distributed training, served by emberd.

    import ember
    loader = ember.Loader("fmnist-train", batch_size=64, epochs=2)   # rank, job: launcher's
    for epoch in range(2):
        for batch in loader:                     # dict of tensors, views into the ring
            x, y = batch["image"], batch["label"]

``ember.init_process_group("gloo")`` bootstraps torch.distributed through emberd;
``ember.train.run(train_loop, workers=N, ...)`` runs a data-parallel training loop without
the DDP plumbing (process group, device, DDP, checkpoints with the loaders' state, restarts).
``ember.Client`` registers and inspects datasets as emberctl does. Errors are
``ember.Error`` subclasses carrying the daemon's message.
"""

import os as _os

# A wheel carries emberd beside the package: the daemon a Client starts when none serves.
_BUNDLED_EMBERD = _os.path.join(_os.path.dirname(__file__), "bin", "emberd")
if "EMBER_EMBERD" not in _os.environ and _os.access(_BUNDLED_EMBERD, _os.X_OK):
    _os.environ["EMBER_EMBERD"] = _BUNDLED_EMBERD

from ._ember import (Client, DaemonStatus, DatasetInfo, DecodeWorkerStatus, JobStatus,
                     LoaderState, PendingSegmentStatus, RankProgress, StreamStatus, TensorInfo)
from ._errors import (AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, Error,
                      FailedPrecondition, Internal, InvalidArgument, NotFound,
                      PermissionDenied, ResourceExhausted, Unavailable)
from ._device import DeviceLoader
from ._loader import Batch, Loader, detect_format, launch_env

__version__ = "0.1.0"


def __getattr__(name):
    # torch.distributed's: imported when first used, so that ember imports without torch.
    if name in ("Store", "init_process_group"):
        from . import _distributed
        return getattr(_distributed, name)
    if name == "train":
        import importlib
        return importlib.import_module(".train", __name__)
    raise AttributeError(f"module 'ember' has no attribute {name!r}")


__all__ = [
    "AlreadyExists", "Batch", "Cancelled", "Client", "DaemonStatus", "DataLoss",
    "DatasetInfo", "DeadlineExceeded", "DecodeWorkerStatus", "DeviceLoader", "Error",
    "FailedPrecondition", "Internal", "InvalidArgument", "JobStatus", "Loader", "LoaderState",
    "NotFound", "PendingSegmentStatus", "PermissionDenied", "RankProgress", "ResourceExhausted",
    "Store", "StreamStatus", "TensorInfo", "Unavailable", "detect_format", "init_process_group",
    "launch_env",
]
