"""Run one claimed job and decide its next state.

claim (committed) → run the handler outside any transaction → its outcome goes to the
completer, which writes it in a batch, guarded by (status = 'running', execution_id).
A handler that wrote in ctx.transaction() completes in that transaction instead, with
the same guarded statement, so its writes and its completion commit together. If the
guard matches zero rows this execution lost its lease (it was recovered, or it is a
zombie woken from a freeze): the result is discarded and the business transaction
rolls back.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import KW_ONLY, dataclass
from typing import Any
from uuid import UUID

from jobwarden.worker.core import errors as E
from jobwarden.worker.core import tracing
from jobwarden.worker.core.dberrors import DB_UNREACHABLE
from jobwarden.worker.core.env import worker_setting
from jobwarden.worker.core.logs import ms_since
from jobwarden.worker.core.policy import DEFAULT_POLICY
from jobwarden.worker.core.sanitize import (
    describe_exception,
    describe_traceback,
    describe_validation,
    safe_str,
    sanitize_text,
    validation_error,
)
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.core.storable import storable_json_text, storable_text
from jobwarden.worker.core.transitions import TRANSITIONS, next_status
from jobwarden.worker.engine.attempt_log import CURRENT
from jobwarden.worker.engine.completer import (
    STORE_REFUSED,
    Completion,
    count_refused,
    log_outcomes,
    unstorable,
    write_batch,
    write_batch_async,
)
from jobwarden.worker.engine.context import ExecutionControl, LeaseLost
from jobwarden.worker.jobs.registry import JobType
from jobwarden.worker.store.jobstore import UnreadableJson

log = logging.getLogger("jobwarden.runner")


@dataclass
class Outcome:
    """Where an execution leaves its job."""

    status: JobStatus  # the job's next status
    outcome: ExecutionOutcome  # the job_executions.outcome
    # The rest by keyword only: code and message are both text, and a swap would store
    # the message as the code.
    _: KW_ONLY
    error_code: str | None = None
    error: str | None = None
    delay: float = 0.0  # seconds until the next attempt when status == 'pending'
    #: The handler's traceback, sanitized and size-capped, when it raised (not for skip/cancel)
    traceback: str | None = None
    #: What a completing handler returned, as JSON text (None: it returned None).
    result: str | None = None

    def __post_init__(self) -> None:
        # Built from whatever the handler raised: make it storable here, once, so every
        # writer of outcomes stores it as it is. (Most outcomes are completions, with
        # neither: nothing to call then.)
        if self.error_code is not None:
            self.error_code = storable_text(self.error_code)
        if self.error is not None:
            self.error = storable_text(self.error)

    @property
    def retrying(self) -> bool:
        return self.status is JobStatus.PENDING


def retry_or_fail(job_type: JobType | None, attempt: int, max_attempts: int, code: str,
                  message: str, outcome: ExecutionOutcome = ExecutionOutcome.RETRY,
                  delay: float | None = None) -> Outcome:
    """Back to pending after a backoff, or failed when the attempts are used up (the
    transitions table decides, worker/core/transitions.py)."""
    status, recorded = next_status(outcome, attempt, max_attempts)
    if status is JobStatus.FAILED:
        return Outcome(status, recorded, error_code=code,
                       error=f"{message} (attempt {attempt} of {max_attempts}: giving up)")
    if delay is None:
        policy = job_type.backoff if job_type else DEFAULT_POLICY
        delay = policy.delay_for(attempt)
    return Outcome(status, recorded, error_code=code, error=message, delay=delay)


def ended(outcome: ExecutionOutcome, code: str | None, message: str | None,
          delay: float = 0.0) -> Outcome:
    """An outcome whose next status is fixed (TRANSITIONS), with the table's code unless
    the handler gave one."""
    t = TRANSITIONS[outcome]
    assert t.to is not None, outcome
    return Outcome(t.to, outcome, error_code=code or t.error_code, error=message, delay=delay)


def _completed_status() -> JobStatus:
    t = TRANSITIONS[ExecutionOutcome.COMPLETED]
    assert t.to is not None and t.error_code is None, t  # what ended() would make
    return t.to


#: Where a completion leaves its job: the transitions table's word, read once (an enum's
#: hash is a Python call, and most executions complete).
_COMPLETED_STATUS = _completed_status()


def classify(exc: BaseException | None, run: ExecutionControl, job_type: JobType) -> Outcome:
    """Map how the handler ended to the job's next state (the retry policy), carrying the
    handler's traceback when it raised an error (docs/architecture.md §3, job_executions)."""
    outcome = _classify(exc, run, job_type)
    if exc is not None and outcome.status not in ("completed", "skipped", "cancelled") \
            and outcome.outcome is not ExecutionOutcome.SNOOZED:  # a snooze is no error
        outcome.traceback = storable_text(describe_traceback(exc))  # NULs, lone surrogates
    return outcome


def _classify(exc: BaseException | None, run: ExecutionControl, job_type: JobType) -> Outcome:
    attempt, max_attempts = run.attempt, run.max_attempts
    # Past its deadline an execution ended by its timeout, however it ended: a handler
    # that overran and then returned before the worker stopped waiting is no success.
    if run.timed_out or run.past_deadline():
        return retry_or_fail(job_type, attempt, max_attempts, E.TIMEOUT,
                             f"execution exceeded its {job_type.timeout:g}s timeout",
                             outcome=ExecutionOutcome.TIMEOUT)
    if exc is None:
        return Outcome(_COMPLETED_STATUS, ExecutionOutcome.COMPLETED)  # as ended() makes it
    if isinstance(exc, E.Snooze):
        if run.snoozes >= job_type.max_snoozes:
            return ended(ExecutionOutcome.FAILED, E.SNOOZE_LIMIT,
                         f"snoozed {run.snoozes} times, {job_type.name}'s max_snoozes: "
                         f"giving up")
        return ended(ExecutionOutcome.SNOOZED, None, None, delay=exc.seconds)
    message = describe_exception(exc)
    if isinstance(exc, E.SkipJob):
        return ended(ExecutionOutcome.SKIPPED, None, sanitize_text(exc.reason) or None)
    if isinstance(exc, E.JobCancelled) or run.operator_cancelled:
        return ended(ExecutionOutcome.CANCELLED, None, "cancelled at operator request")
    if not isinstance(exc, Exception | asyncio.CancelledError):
        # SystemExit, KeyboardInterrupt, GeneratorExit, a handler's own BaseException:
        # this job's failure, never the worker's (docs/faults-handlers.md).
        return retry_or_fail(job_type, attempt, max_attempts, E.HANDLER_ABORTED, message)
    if isinstance(exc, E.AmbiguousOutcome):
        return ended(ExecutionOutcome.UNKNOWN, exc.code, message)
    if isinstance(exc, E.PermanentError):
        return ended(ExecutionOutcome.FAILED, exc.code, message)
    if isinstance(exc, E.RateLimited):
        return retry_or_fail(job_type, attempt, max_attempts, exc.code, message,
                             delay=exc.retry_after)
    if isinstance(exc, E.RetryableError):
        return retry_or_fail(job_type, attempt, max_attempts, exc.code, message)
    return retry_or_fail(job_type, attempt, max_attempts, E.UNKNOWN, message)


def prepare_payload(job_type: JobType, payload: dict[str, Any], version: int) -> Any:
    """The payload as the handler takes it: upgraded to the current version and, when the
    type declares a model, validated into it. Raises PermanentError/RetryableError."""
    if isinstance(payload, UnreadableJson):  # no handler can take it, now or on a retry
        raise E.PermanentError(E.PAYLOAD_INVALID, payload.reason)
    return _validate(job_type, _upgrade(job_type, payload, version))


def _validate(job_type: JobType, payload: dict[str, Any]) -> Any:
    try:
        return job_type.validate_payload(payload)
    except validation_error() as exc:
        # Another producer (or an older release) wrote a payload that does not fit:
        # retrying cannot fix it.
        raise E.PermanentError(E.PAYLOAD_INVALID, describe_validation(exc)) from None


def _upgrade(job_type: JobType, payload: dict[str, Any], version: int) -> dict[str, Any]:
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
            f"payload v{version} cannot be upgraded to v{job_type.version}: "
            f"{safe_str(exc.args[0] if exc.args else '', 'exception')}",
        ) from None
    except Exception as exc:
        raise E.PermanentError(
            E.PAYLOAD_VERSION_UNSUPPORTED,
            f"upgrading payload v{version} to v{job_type.version} failed: "
            f"{safe_str(exc, 'exception')}") from exc


def max_result_bytes() -> int:
    limit: int = worker_setting("max_result_bytes")
    return limit


def with_result(outcome: Outcome, value: Any) -> Outcome:
    """A completion carrying what the handler returned, as stored JSON; a value that is
    not JSON, or over JOBWARDEN_MAX_RESULT_BYTES encoded, fails the job instead (the same
    code would return the same value on a retry)."""
    if value is None or outcome.status is not JobStatus.COMPLETED:
        return outcome
    try:
        text = storable_json_text(value)
    except BaseException as exc:  # ValueError (storable_json_text's own refusal), or
        # whatever a value of the handler's raises as it is read: the job's failure
        return ended(ExecutionOutcome.FAILED, E.RESULT_UNSTORABLE,
                     f"the handler returned a value that is not JSON: "
                     f"{safe_str(exc, 'exception')}")
    if (size := len(text.encode())) > (limit := max_result_bytes()):
        return ended(ExecutionOutcome.FAILED, E.RESULT_TOO_LARGE,
                     f"the handler returned {size} bytes of JSON, over the {limit}-byte "
                     "limit for a result: store the data elsewhere and return its id")
    outcome.result = text
    return outcome


def run_handler(job_type: JobType, run: ExecutionControl,
                payload: dict[str, Any]) -> Outcome | None:
    """Run the handler (given `run.ctx`, its view); returns its Outcome, or None when the
    execution lost its lease. In a span of its own when tracing is on (tracing.py)."""
    if not tracing.enabled():
        return _run_handler(job_type, run, payload)
    with _span(job_type, run) as span:
        outcome = _run_handler(job_type, run, payload)
        _ended(span, outcome)
    return outcome


def _run_handler(job_type: JobType, run: ExecutionControl,
                 payload: dict[str, Any]) -> Outcome | None:
    exc: BaseException | None = None
    value: Any = None
    # What is logged from here until the handler returns is this attempt's (attempt_log.py).
    token = CURRENT.set(run)
    try:
        value = job_type(run.ctx, prepare_payload(job_type, payload, run.version))
    except LeaseLost:
        run.close_transaction(commit=False)
        return None
    except BaseException as e:  # every failure is classified and recorded, never lost:
        exc = e  # a SystemExit ends this job, not the thread that ran it
    finally:
        CURRENT.reset(token)
    if run.lease_lost:
        run.close_transaction(commit=False)
        return None
    outcome = classify(exc, run, job_type)
    return outcome if value is None else with_result(outcome, value)


async def run_handler_async(job_type: JobType, run: ExecutionControl,
                            payload: dict[str, Any]) -> Outcome | None:
    """run_handler for a coroutine handler, in its task on the lane's loop (whose context
    the span is current in: the handler's own spans are its children)."""
    if not tracing.enabled():
        return await _run_handler_async(job_type, run, payload)
    with _span(job_type, run) as span:
        outcome = await _run_handler_async(job_type, run, payload)
        _ended(span, outcome)
    return outcome


def _span(job_type: JobType, run: ExecutionControl) -> Any:
    return tracing.execution_span(job_id=run.job_id, job_type=job_type.name,
                                  queue=run.queue, attempt=run.attempt,
                                  stored=run.trace_context)


def _ended(span: Any, outcome: Outcome | None) -> None:
    if outcome is None:  # the lease was lost: another execution owns the job now
        tracing.ended(span, outcome=None, error_code=None, error=None)
    else:
        tracing.ended(span, outcome=outcome.outcome.value, error_code=outcome.error_code,
                      error=outcome.error)


async def _run_handler_async(job_type: JobType, run: ExecutionControl,
                             payload: dict[str, Any]) -> Outcome | None:
    """run_handler for a coroutine handler, in its task on the lane's loop. The executor
    cancels that task on a timeout, an operator's cancel, a lost lease or shutdown: the
    CancelledError ends the handler here and is classified like any other ending
    (classify reads why: timeout, operator cancel)."""
    exc: BaseException | None = None
    value: Any = None
    # This task's context: the tasks the handler starts copy it, and log for it too.
    token = CURRENT.set(run)
    try:
        value = await job_type(run.ctx, prepare_payload(job_type, payload, run.version))
    except LeaseLost:
        await run.close_async_transaction(commit=False)
        return None
    except asyncio.CancelledError as e:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # handled: what follows (the hand-over) runs uncancelled
        exc = e
    except BaseException as e:  # classified and recorded, never lost: a SystemExit or a
        exc = e  # KeyboardInterrupt let through would stop the lane's loop
    finally:
        CURRENT.reset(token)
    if run.lease_lost:
        await run.close_async_transaction(commit=False)
        return None
    outcome = classify(exc, run, job_type)
    return outcome if value is None else with_result(outcome, value)


class CommitUncertain(Exception):
    """The business transaction's connection failed while committing the completion."""


def completion(run: ExecutionControl, outcome: Outcome, lease: float) -> Completion:
    """The outcome as the completer writes it, with progress not yet written and the
    attempt's log lines (taken: a line logged after this is not kept)."""
    progress, checkpoint = run.take_pending()
    lines, dropped = run.take_log()
    c = Completion(job_id=run.job_id, execution_id=run.execution_id, type=run.type,
                   attempt=run.attempt, lease=lease, status=outcome.status,
                   outcome=outcome.outcome, error_code=outcome.error_code,
                   error=outcome.error, delay=outcome.delay, progress=progress,
                   checkpoint=checkpoint, traceback=outcome.traceback, queue=run.queue,
                   duration_ms=ms_since(run.started), concurrency_key=run.concurrency_key)
    # What most executions have none of is set only when there is some: each keyword
    # of the call costs (these five were 0.2 us a job of the no-op drain).
    if outcome.result is not None:
        c.result = outcome.result
    if run.batch_id is not None:
        c.batch_id = run.batch_id
    if run.batch_added:
        c.batch_added = run.batch_added
    if lines is not None or dropped:
        c.log_lines, c.log_dropped = lines, dropped
    return c


def complete_in_transaction(run: ExecutionControl, outcome: Outcome, lease: float) -> bool:
    """Complete the job in the handler's business transaction (ctx.transaction()), so the
    business writes and the completion commit together or not at all. False means this
    execution no longer owned the job: both were rolled back. Raises CommitUncertain when
    the connection died around the commit."""
    conn = run.transaction_conn
    assert conn is not None
    c = completion(run, outcome, lease)
    try:
        owned = run.execution_id in write_batch(conn, [c])
        run.close_transaction(commit=owned)
    except DB_UNREACHABLE as exc:
        # Nobody knows whether the business writes and the completion committed. Never
        # complete without them: the caller hands the job to a retry instead, which the
        # guard refuses if the commit did happen.
        run.close_transaction(commit=False)
        raise CommitUncertain(str(exc)) from exc
    except STORE_REFUSED as exc:
        # PostgreSQL refused a value of the completion: the business writes roll back and
        # the job fails at once, saying why, instead of waiting out its lease.
        run.close_transaction(commit=False)
        _log_unstorable(run, outcome, exc)
        return _write_on_pool(run, unstorable(c, exc))
    recorded = {} if owned else _refused_on_pool(run, c)
    log_outcomes([c], {c.execution_id: outcome.status} if owned else {}, recorded)
    return owned


async def complete_in_transaction_async(run: ExecutionControl, outcome: Outcome,
                                        lease: float) -> bool:
    """complete_in_transaction for a coroutine handler's AsyncConnection: the same
    finish_executions and the same answers (the rare follow-ups on the worker's pool,
    on a thread)."""
    conn = run.async_transaction_conn
    assert conn is not None
    c = completion(run, outcome, lease)
    try:
        owned = run.execution_id in await write_batch_async(conn, [c])
        await run.close_async_transaction(commit=owned)
    except DB_UNREACHABLE as exc:
        await run.close_async_transaction(commit=False)  # see complete_in_transaction
        raise CommitUncertain(str(exc)) from exc
    except STORE_REFUSED as exc:
        await run.close_async_transaction(commit=False)
        _log_unstorable(run, outcome, exc)
        return await asyncio.to_thread(_write_on_pool, run, unstorable(c, exc))
    recorded = {} if owned else await asyncio.to_thread(_refused_on_pool, run, c)
    log_outcomes([c], {c.execution_id: outcome.status} if owned else {}, recorded)
    return owned


def _log_unstorable(run: ExecutionControl, outcome: Outcome, exc: BaseException) -> None:
    log.error("job %s: the %s outcome could not be stored (%s); recording %s instead",
              run.job_id, outcome.outcome.value, type(exc).__name__,
              E.OUTCOME_UNSTORABLE, extra={"action": "outcome_unstorable",
                                           "job_id": run.job_id})


def _write_on_pool(run: ExecutionControl, c: Completion) -> bool:
    with run.pool.connection() as conn:
        return run.execution_id in write_batch(conn, [c])


def _refused_on_pool(run: ExecutionControl, c: Completion) -> dict[UUID, str]:
    try:
        with run.pool.connection() as conn:
            return count_refused(conn, [c])
    except DB_UNREACHABLE:
        return {c.execution_id: "unknown"}
