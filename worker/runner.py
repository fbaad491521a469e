"""Run one claimed job and decide its next state; record it by compare-and-set.

claim (committed) → run the handler outside any transaction → one short transaction
records the outcome, guarded by (status = 'running', execution_id). If that guard
matches zero rows this execution lost its lease (it was recovered, or it is a zombie
woken from a freeze): the result is discarded and the business transaction rolls back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout
from pydantic import ValidationError

from . import errors as E
from .context import JobContext, LeaseLost
from .policy import RetryPolicy
from .queries import Q
from .registry import JobType
from .sanitize import describe_exception, describe_validation, sanitize_text

log = logging.getLogger("jobwarden.runner")
#: Backoff for jobs whose type this worker does not know (recovery of foreign types).
DEFAULT_POLICY = RetryPolicy()


@dataclass
class Outcome:
    """Where an execution leaves its job."""

    status: str  # the job's next status
    outcome: str  # the job_executions.outcome
    error_code: str | None = None
    error: str | None = None
    delay: float = 0.0  # seconds until the next attempt when status == 'pending'

    @property
    def retrying(self) -> bool:
        return self.status == "pending"


def retry_or_fail(job_type: JobType | None, attempt: int, max_attempts: int, code: str,
                  message: str, outcome: str = "retry", delay: float | None = None) -> Outcome:
    """Back to pending after a backoff, or failed when the attempts are used up."""
    if attempt >= max_attempts:
        return Outcome("failed", "failed" if outcome == "retry" else outcome, code,
                       f"{message} (attempt {attempt} of {max_attempts}: giving up)")
    if delay is None:
        policy = job_type.backoff if job_type else DEFAULT_POLICY
        delay = policy.delay_for(attempt)
    return Outcome("pending", outcome, code, message, delay)


def classify(exc: BaseException | None, ctx: JobContext, job_type: JobType) -> Outcome:
    """Map how the handler ended to the job's next state (the retry policy)."""
    attempt, max_attempts = ctx.attempt, ctx.max_attempts
    if ctx.timed_out:
        return retry_or_fail(job_type, attempt, max_attempts, E.TIMEOUT,
                             f"execution exceeded its {job_type.timeout:g}s timeout",
                             outcome="timeout")
    if exc is None:
        return Outcome("completed", "completed")
    message = describe_exception(exc)
    if isinstance(exc, E.SkipJob):
        return Outcome("skipped", "skipped", "SKIPPED", sanitize_text(exc.reason) or None)
    if isinstance(exc, E.JobCancelled) or ctx.operator_cancelled:
        return Outcome("cancelled", "cancelled", E.CANCELLED, "cancelled at operator request")
    if isinstance(exc, E.AmbiguousOutcome):
        return Outcome("unknown", "unknown", exc.code, message)
    if isinstance(exc, E.PermanentError):
        return Outcome("failed", "failed", exc.code, message)
    if isinstance(exc, E.RateLimited):
        return retry_or_fail(job_type, attempt, max_attempts, exc.code, message,
                             delay=exc.retry_after)
    if isinstance(exc, E.RetryableError):
        return retry_or_fail(job_type, attempt, max_attempts, exc.code, message)
    return retry_or_fail(job_type, attempt, max_attempts, E.UNKNOWN, message)


def prepare_payload(job_type: JobType, payload: dict, version: int) -> Any:
    """The payload as the handler takes it: upgraded to the current version and, when the
    type declares a model, validated into it. Raises PermanentError/RetryableError."""
    return _validate(job_type, _upgrade(job_type, payload, version))


def _validate(job_type: JobType, payload: dict) -> Any:
    try:
        return job_type.validate_payload(payload)
    except ValidationError as exc:
        # Another producer (or an older release) wrote a payload that does not fit:
        # retrying cannot fix it.
        raise E.PermanentError(E.PAYLOAD_INVALID, describe_validation(exc)) from None


def _upgrade(job_type: JobType, payload: dict, version: int) -> dict:
    """The payload carried to the handler's current version."""
    if version == job_type.version:
        return payload
    if version > job_type.version:
        # A newer producer than this worker (rolling deploy): a newer worker may take it.
        raise E.RetryableError(
            E.PAYLOAD_VERSION_UNSUPPORTED,
            f"payload v{version} is newer than this worker's v{job_type.version}")
    try:
        return job_type.upgrade(payload, version)
    except KeyError as exc:
        raise E.PermanentError(
            E.PAYLOAD_VERSION_UNSUPPORTED,
            f"payload v{version} cannot be upgraded to v{job_type.version}: {exc.args[0]}",
        ) from None
    except Exception as exc:
        raise E.PermanentError(
            E.PAYLOAD_VERSION_UNSUPPORTED,
            f"upgrading payload v{version} to v{job_type.version} failed: {exc}") from exc


def execute(job_type: JobType, ctx: JobContext, payload: dict) -> Outcome | None:
    """Run the handler; returns its Outcome, or None when the execution lost its lease."""
    exc: BaseException | None = None
    try:
        job_type(ctx, prepare_payload(job_type, payload, ctx.version))
    except LeaseLost:
        ctx.close_transaction(commit=False)
        return None
    except Exception as e:  # every failure is classified and recorded, never lost
        exc = e
    if ctx.lease_lost:
        ctx.close_transaction(commit=False)
        return None
    return classify(exc, ctx, job_type)


class CommitUncertain(Exception):
    """The business transaction's connection failed while committing the completion."""


def record(pool, ctx: JobContext, outcome: Outcome, *, business_tx: bool = True) -> bool:
    """Write the outcome if this execution still owns the job. False means it did not:
    the result was discarded (and the business transaction rolled back)."""
    progress, checkpoint = ctx.take_pending()
    params = {
        "job_id": ctx.job_id, "execution_id": ctx.execution_id,
        "status": outcome.status, "outcome": outcome.outcome,
        "error_code": outcome.error_code, "error": sanitize_text(outcome.error),
        "delay": outcome.delay, "progress": progress, "checkpoint": checkpoint,
    }
    if business_tx and ctx._tx_conn is not None and outcome.status == "completed":
        conn = ctx._tx_conn  # business writes and completion commit together
        try:
            owned = conn.execute(Q.finish_execution, params).fetchone() is not None
            ctx.close_transaction(commit=owned)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            # The connection died around the commit: the business writes and the completion
            # either both committed or both did not. Never complete without them; hand the
            # job to a retry instead, which the guard refuses if the commit did happen.
            ctx.close_transaction(commit=False)
            raise CommitUncertain(str(exc)) from exc
    else:
        if business_tx:  # abandoning from another thread leaves the handler's tx alone
            ctx.close_transaction(commit=False)
        with pool.connection() as conn:
            owned = conn.execute(Q.finish_execution, params).fetchone() is not None
    extra = {"action": "job_" + outcome.outcome if owned else "result_discarded",
             "job_id": ctx.job_id, "execution_id": str(ctx.execution_id),
             "job_type": ctx.type, "attempt": ctx.attempt, "error_code": outcome.error_code}
    if owned:
        log.info("job %s %s -> %s%s", ctx.job_id, ctx.type, outcome.status,
                 f" ({outcome.error_code})" if outcome.error_code else "", extra=extra)
    else:
        log.warning("job %s: execution %s no longer owns the job (recorded as %s); its %s "
                    "result is discarded", ctx.job_id, ctx.execution_id,
                    _recorded_outcome(pool, ctx), outcome.outcome, extra=extra)
    return owned


def _recorded_outcome(pool, ctx: JobContext) -> str:
    """How this execution ended in job_executions: worker_lost (recovered while it was
    frozen or cut off), or its own earlier write that committed before a connection
    dropped."""
    try:
        with pool.connection() as conn:
            row = conn.execute(Q.execution_outcome,
                               {"execution_id": ctx.execution_id}).fetchone()
        return (row[0] if row else None) or "unfinished"
    except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout):
        return "unknown"
