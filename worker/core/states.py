"""The words the runtime stores: job statuses, execution outcomes, worker states.

StrEnum members compare equal to the text in the database (`JobStatus.PENDING ==
'pending'`) and are written as that text by psycopg and json, so code may hold the enum
while SQL and templates keep plain strings.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    """Every value `background_jobs.status` may take."""

    PENDING = "pending"
    #: Enqueued after parents not all completed yet: never claimed until they are
    #: (docs/guide/flows.md).
    WAITING = "waiting"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"


class ExecutionOutcome(StrEnum):
    """How one execution (one claim) ended: `job_executions.outcome`."""

    COMPLETED = "completed"
    RETRY = "retry"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"
    WORKER_LOST = "worker_lost"
    TIMEOUT = "timeout"
    HANDED_BACK = "handed_back"
    SNOOZED = "snoozed"


class WorkerState(StrEnum):
    """What `job_workers.state` says about a worker process."""

    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"
    GONE = "gone"


#: Statuses no worker will move a job out of by itself.
TERMINAL_STATUSES = (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED,
                     JobStatus.SKIPPED)
#: A job in one of these holds its idempotency key: enqueueing it again returns it.
LIVE_STATUSES = (JobStatus.PENDING, JobStatus.RUNNING)
