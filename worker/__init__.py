"""Jobwarden's job runtime, `jobwarden.worker`. The public API (docs/architecture.md §4),
which the `jobwarden` package re-exports:

    from jobwarden import job, enqueue, RetryableError, PermanentError, RateLimited, SkipJob
"""

from jobwarden.worker.core.errors import (
    AmbiguousOutcome,
    EnqueueError,
    JobCancelled,
    PermanentError,
    RateLimited,
    RetryableError,
    SkipJob,
    Snooze,
)
from jobwarden.worker.core.policy import RetryPolicy
from jobwarden.worker.engine.context import (
    AsyncEffect,
    AsyncJobContext,
    Effect,
    JobContext,
    LeaseLost,
)
from jobwarden.worker.jobs.batches import (
    BatchState,
    find_batches,
    get_batch,
    open_batch,
    open_batch_async,
)
from jobwarden.worker.jobs.enqueue import enqueue, enqueue_async, enqueue_many, enqueue_many_async
from jobwarden.worker.jobs.flows import At, Dep
from jobwarden.worker.jobs.job_spec import JobSpec
from jobwarden.worker.jobs.registry import JobType, Registry, job, registry
from jobwarden.worker.jobs.uniqueness import Enqueued

__all__ = [
    "AmbiguousOutcome", "AsyncEffect", "AsyncJobContext", "At", "BatchState", "Dep", "Effect",
    "EnqueueError", "Enqueued", "JobCancelled", "JobContext", "JobSpec", "JobType", "LeaseLost",
    "PermanentError", "RateLimited", "Registry", "RetryPolicy", "RetryableError", "SkipJob",
    "Snooze", "enqueue", "enqueue_async", "enqueue_many", "enqueue_many_async", "find_batches",
    "get_batch", "job", "open_batch", "open_batch_async", "registry",
]
