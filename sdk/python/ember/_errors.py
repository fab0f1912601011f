"""ember.Error and its subclasses: one per status code of the daemon and the SDK.

Every error carries the daemon's (or the SDK's) message and its code's stable name, e.g.
``ember.NotFound("dataset 'fmnist' is not registered")`` with ``code == "not_found"``.
"""

from __future__ import annotations


class Error(Exception):
    """An error from emberd or the Ember SDK. ``message``: what went wrong, naming the
    dataset, file, field or value; ``code``: the status code's name ("not_found", ...)."""

    code = "unknown"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidArgument(Error, ValueError):
    """Bad input: a value, a field, a file's content."""
    code = "invalid_argument"


class NotFound(Error, LookupError):
    """A named thing (dataset, file, key) does not exist."""
    code = "not_found"


class AlreadyExists(Error):
    """A named thing exists and must not be replaced."""
    code = "already_exists"


class FailedPrecondition(Error):
    """The call is not possible in the current state (e.g. every ring slot is held)."""
    code = "failed_precondition"


class ResourceExhausted(Error):
    """A budget (shared memory, streams, connections) is used up."""
    code = "resource_exhausted"


class DeadlineExceeded(Error, TimeoutError):
    """A wait ran past its timeout."""
    code = "deadline_exceeded"


class Unavailable(Error, ConnectionError):
    """emberd (or another node) cannot be reached, or went away."""
    code = "unavailable"


class DataLoss(Error):
    """Data is corrupt or truncated (the message names the file)."""
    code = "data_loss"


class Cancelled(Error):
    """The operation was stopped (the stream closed, the daemon shutting down)."""
    code = "cancelled"


class Internal(Error):
    """A bug or an unexpected OS error."""
    code = "internal"


class PermissionDenied(Error, PermissionError):
    """The caller may not do this (another user's dataset or job, a file it cannot read)."""
    code = "permission_denied"


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, ResourceExhausted,
    DeadlineExceeded, Unavailable, DataLoss, Cancelled, Internal, PermissionDenied)}


def error_class(code: str) -> type[Error]:
    """The Error subclass for a status code's name; Error itself for an unknown one."""
    return _BY_CODE.get(code, Error)
