"""Jobwarden's job runtime. The public API (docs/architecture.md §4):

    from worker import job, enqueue, RetryableError, PermanentError, RateLimited, SkipJob
"""

from worker.core.errors import (
    AmbiguousOutcome,
    EnqueueError,
    JobCancelled,
    PermanentError,
    RateLimited,
    RetryableError,
    SkipJob,
    Snooze,
)
from worker.core.policy import RetryPolicy
from worker.engine.context import AsyncEffect, AsyncJobContext, Effect, JobContext, LeaseLost
from worker.jobs.enqueue import enqueue, enqueue_async, enqueue_many, enqueue_many_async
from worker.jobs.job_spec import JobSpec
from worker.jobs.registry import JobType, Registry, job, registry

__all__ = [
    "AmbiguousOutcome", "AsyncEffect", "AsyncJobContext", "Effect", "EnqueueError",
    "JobCancelled", "JobContext", "JobSpec", "JobType", "LeaseLost", "PermanentError",
    "RateLimited", "Registry", "RetryPolicy", "RetryableError", "SkipJob", "Snooze",
    "enqueue", "enqueue_async", "enqueue_many", "enqueue_many_async", "job", "registry",
]
