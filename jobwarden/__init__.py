"""Jobwarden: PostgreSQL background jobs for Python web products, with an operations console.

The public API (docs/architecture.md §4):

    from jobwarden import job, enqueue, RetryableError, PermanentError, RateLimited, SkipJob

The runtime is `jobwarden.worker`, the console `jobwarden.console` (`create_app`, `Console`).
This package is the only top-level name an installed Jobwarden adds (pyproject.toml maps
the repository's worker/ and console/ folders under it), so an application's own
`worker.py` or `console/` never shadows it, nor it them.

Each name is loaded at its first use (a module `__getattr__`, PEP 562), from
`jobwarden.worker`, the same object: `import jobwarden` alone loads none of the runtime,
so the `jobwarden` command (jobwarden/command.py) starts before the runtime's modules
load, and holds the cycle collector while they do (worker/engine/heap.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

    #: The installed distribution's version (its metadata, from pyproject.toml).
    __version__: str

__all__ = [
    "AmbiguousOutcome", "AsyncEffect", "AsyncJobContext", "At", "BatchState", "Dep", "Effect",
    "EnqueueError", "Enqueued", "JobCancelled", "JobContext", "JobSpec", "JobType", "LeaseLost",
    "PermanentError", "RateLimited", "Registry", "RetryPolicy", "RetryableError", "SkipJob",
    "Snooze", "enqueue", "enqueue_async", "enqueue_many", "enqueue_many_async", "find_batches",
    "get_batch", "job", "open_batch", "open_batch_async", "registry",
]


def __getattr__(name: str) -> Any:
    """A public name, loaded at its first use (then kept here, as an import would)."""
    if name == "__version__":
        from jobwarden.worker.core.version import version

        value: Any = version()
    elif name in __all__:
        import jobwarden.worker

        value = getattr(jobwarden.worker, name)
    else:
        raise AttributeError(f"module 'jobwarden' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})
