"""Jobwarden: PostgreSQL background jobs for Python web products, with an operations console.

The public API (docs/architecture.md §4):

    from jobwarden import job, enqueue, RetryableError, PermanentError, RateLimited, SkipJob

The runtime is `jobwarden.worker`, the console `jobwarden.console` (`create_app`, `Console`).
This package is the only top-level name an installed Jobwarden adds (pyproject.toml maps
the repository's worker/ and console/ folders under it), so an application's own
`worker.py` or `console/` never shadows it, nor it them.
"""

from jobwarden.worker import (
    AmbiguousOutcome,
    AsyncEffect,
    AsyncJobContext,
    At,
    BatchState,
    Dep,
    Effect,
    Enqueued,
    EnqueueError,
    JobCancelled,
    JobContext,
    JobSpec,
    JobType,
    LeaseLost,
    PermanentError,
    RateLimited,
    Registry,
    RetryableError,
    RetryPolicy,
    SkipJob,
    Snooze,
    enqueue,
    enqueue_async,
    enqueue_many,
    enqueue_many_async,
    find_batches,
    get_batch,
    job,
    open_batch,
    open_batch_async,
    registry,
)
from jobwarden.worker.core.version import version as _version

#: The installed distribution's version (its metadata, from pyproject.toml).
__version__ = _version()

__all__ = [
    "AmbiguousOutcome", "AsyncEffect", "AsyncJobContext", "At", "BatchState", "Dep", "Effect",
    "EnqueueError", "Enqueued", "JobCancelled", "JobContext", "JobSpec", "JobType", "LeaseLost",
    "PermanentError", "RateLimited", "Registry", "RetryPolicy", "RetryableError", "SkipJob",
    "Snooze", "enqueue", "enqueue_async", "enqueue_many", "enqueue_many_async", "find_batches",
    "get_batch", "job", "open_batch", "open_batch_async", "registry",
]
