"""Jobwarden's job runtime. The public API (docs/architecture.md §4):

    from worker import job, enqueue, RetryableError, PermanentError, RateLimited, SkipJob
"""

from .context import Effect, JobContext, LeaseLost
from .enqueue import enqueue, enqueue_many
from .errors import (
    AmbiguousOutcome,
    EnqueueError,
    JobCancelled,
    PermanentError,
    RateLimited,
    RetryableError,
    SkipJob,
    Snooze,
)
from .job_spec import JobSpec
from .policy import RetryPolicy
from .registry import JobType, Registry, job, registry

__all__ = [
    "AmbiguousOutcome", "Effect", "EnqueueError", "JobCancelled", "JobContext", "JobSpec",
    "JobType", "LeaseLost", "PermanentError", "RateLimited", "Registry", "RetryPolicy",
    "RetryableError", "SkipJob", "Snooze", "enqueue", "enqueue_many", "job", "registry",
]
