"""What a handler sees: `ctx`, its view of the one execution it is running (JobContext,
whose public attributes are HANDLER_API), and the worker's controls of that execution
(ExecutionControl), which the handler never gets."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import TYPE_CHECKING, Any, NoReturn
from uuid import UUID

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from jobwarden.worker.core.dberrors import DB_UNREACHABLE
from jobwarden.worker.core.errors import AmbiguousOutcome, JobCancelled, Snooze
from jobwarden.worker.core.logs import running_event
from jobwarden.worker.core.sanitize import sanitize_payload
from jobwarden.worker.core.storable import storable_json_text, storable_text
from jobwarden.worker.engine.attempt_log import AttemptLog
from jobwarden.worker.jobs import batches
from jobwarden.worker.jobs.batches import Jobs
from jobwarden.worker.jobs.registry import Registry
from jobwarden.worker.jobs.registry import registry as default_registry
from jobwarden.worker.store.event_totals import ZOMBIE_LEASE, count_on
from jobwarden.worker.store.jobstore import AsyncJobStore, JobStore, run_steps, run_steps_async
from jobwarden.worker.store.queries import Q, Query

if TYPE_CHECKING:
    from jobwarden.worker.engine.producer import ClaimedJob

log = logging.getLogger("jobwarden.job")

#: Minimum seconds between two writes of progress/checkpoint for one execution; values
#: saved in between are kept in memory and flushed by the next heartbeat or outcome.
PROGRESS_WRITE_INTERVAL = 2.0


class LeaseLost(Exception):
    """This execution no longer owns its job (its lease expired and it was recovered)."""


#: Everything a handler may use of its `ctx` (docs/architecture.md §4, README "The
#: handler's `ctx`"): JobContext has no other public attribute, and
#: tests/unit/test_handler_context.py fails if it grows one. The worker's own controls
#: are on ExecutionControl.
HANDLER_API = frozenset({
    # who and what is running
    "job_id", "execution_id", "attempt", "max_attempts", "type", "queue", "version",
    "snoozes", "started", "log",
    # liveness, progress and where to resume
    "heartbeat", "progress", "checkpoint", "save_checkpoint",
    # stopping
    "cancel_requested", "raise_if_cancelled", "wait_cancelled", "time_left", "snooze",
    # effects exactly once
    "idempotency_key", "effect", "transaction",
    # flows: what the parents returned; the batch it is a member of, and its fan-out
    "parent_results", "batch", "add_to_batch",
})


class ExecutionControl:
    """The worker's side of one execution: the handler's progress not yet written, its
    business transaction, the cancel signal and how the execution is being ended (timeout,
    operator cancel, lost lease). The executor, runner, heartbeat and shutdown use it; the
    handler is given only `ctx`, its JobContext."""

    # Slots, not an instance dict: CPython 3.11 keeps an instance's attributes in a
    # compact array shared by its class only while the class's instances set at most 30
    # names between them, and this class sets more. Past that every execution built a
    # dict and grew it as its attributes were set: about 1 us a job of the no-op drain.
    __slots__ = ("pool", "job_id", "execution_id", "attempt", "max_attempts", "type",
                 "queue", "version", "snoozes", "concurrency_key", "batch_id",
                 "trace_context", "batch_added", "started", "deadline", "timed_out",
                 "operator_cancelled", "lease_lost", "_lock", "_cancelled", "_cancel_event",
                 "_pending_progress", "_pending_checkpoint", "_progress_refused",
                 "_last_write", "_tx_conn", "_tx_cm", "_async_pool", "_atx_conn", "_atx_cm",
                 "on_cancel", "ctx", "_attempt_log", "_log_taken")

    def __init__(self, *, pool: ConnectionPool, job_id: int, execution_id: UUID, attempt: int,
                 max_attempts: int, type: str, queue: str, version: int, checkpoint: Any = None,
                 job_idempotency_key: str | None = None, timeout: float | None = None,
                 snoozes: int = 0,
                 async_pool: Callable[[], Awaitable[AsyncConnectionPool]] | None = None,
                 started: float | None = None, concurrency_key: str | None = None,
                 batch_id: int | None = None, trace_context: str | None = None) -> None:
        self._setup(pool, job_id, execution_id, attempt, max_attempts, type, queue, version,
                    checkpoint, job_idempotency_key, timeout, snoozes, async_pool, started,
                    concurrency_key, batch_id, trace_context)

    @classmethod
    def for_job(cls, job: ClaimedJob, *, pool: ConnectionPool, timeout: float | None,
                async_pool: Callable[[], Awaitable[AsyncConnectionPool]] | None,
                started: float) -> ExecutionControl:
        """The control of a claimed job's execution: what the keywords make of the job's
        fields (the executor's, once per job: a call of seventeen keywords took about 1 us
        of it; the job's fields passed on by position, a tenth of that)."""
        self = cls.__new__(cls)
        self._setup(pool, job.id, job.execution_id, job.attempt, job.max_attempts, job.type,
                    job.queue, job.version, job.checkpoint, job.idempotency_key, timeout,
                    job.snoozes, async_pool, started, job.concurrency_key, job.batch_id,
                    job.trace_context)
        return self

    def _setup(self, pool: ConnectionPool, job_id: int, execution_id: UUID, attempt: int,
               max_attempts: int, type: str, queue: str, version: int, checkpoint: Any,
               job_idempotency_key: str | None, timeout: float | None, snoozes: int,
               async_pool: Callable[[], Awaitable[AsyncConnectionPool]] | None,
               started: float | None, concurrency_key: str | None, batch_id: int | None,
               trace_context: str | None) -> None:
        """__init__'s work, its keywords in their order by position (for_job)."""
        self.pool = pool
        self.job_id = job_id
        self.execution_id = execution_id
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.type = type
        self.queue = queue
        self.version = version
        #: How often earlier executions of this job snoozed it.
        self.snoozes = snoozes
        self.concurrency_key = concurrency_key
        #: The batch the job is a member of (None: none), and how many members the handler
        #: added to it in its business transaction, counted as that commits with the
        #: outcome (completer.py, write_batch).
        self.batch_id = batch_id
        #: The trace the job was enqueued in (worker/core/tracing.py; None: none).
        self.trace_context = trace_context
        self.batch_added = 0
        #: When the worker decided to start it (time.monotonic()): `started`, given by the
        #: executor from before its lease check, else now.
        self.started = time.monotonic() if started is None else started
        self.deadline = None if timeout is None else self.started + timeout
        self.timed_out = False
        self.operator_cancelled = False
        self.lease_lost = False
        self._lock = threading.Lock()
        # The cancel signal: a flag, and an Event made only for a handler that waits on it
        # (ctx.wait_cancelled). Most executions never wait, and making an Event (a
        # Condition and its lock) takes 3.6 us, a twelfth of the worker's CPU per no-op job.
        self._cancelled = False
        self._cancel_event: threading.Event | None = None
        # Progress and checkpoint saved but not yet written, as JSON text made at the
        # call (storable_json_text): a value the handler changes afterwards is not
        # changed here, and what is pending always encodes.
        self._pending_progress: str | None = None
        self._pending_checkpoint: str | None = None
        self._progress_refused = False  # a refused progress value was logged already
        self._last_write = 0.0
        # the business transaction, committed with the outcome, and the pool's checkout
        # that holds its connection
        self._tx_conn: psycopg.Connection | None = None
        self._tx_cm: AbstractContextManager[psycopg.Connection] | None = None
        # A coroutine handler's: its lane loop's async pool (None: a thread handler), its
        # business transaction on that pool, and how to cancel its task (set by the
        # executor once the task exists; called on the first cancel signal).
        self._async_pool = async_pool
        self._atx_conn: psycopg.AsyncConnection | None = None
        self._atx_cm: AbstractAsyncContextManager[psycopg.AsyncConnection] | None = None
        self.on_cancel: Callable[[], None] | None = None
        # The attempt's log lines (attempt_log.py), made when its first line arrives.
        self._attempt_log: AttemptLog | None = None
        self._log_taken = False
        self.ctx: JobContext | AsyncJobContext = (
            JobContext(self, checkpoint=checkpoint, job_idempotency_key=job_idempotency_key)
            if async_pool is None else
            AsyncJobContext(self, checkpoint=checkpoint,
                            job_idempotency_key=job_idempotency_key))

    def forget_handler(self) -> None:
        """The handler has returned: drop what refers back to this execution, its `ctx`
        (which holds this control) and a coroutine's cancel hook (which holds the
        execution and its task). Those were reference cycles of every execution, freed
        only by a full collection, which then had every finished job to walk; without
        them reference counting frees an execution as soon as it is done with. A
        handler that kept its ctx still has it, and its ctx still has this control."""
        self.on_cancel = None
        try:
            del self.ctx
        except AttributeError:  # forgotten already
            pass

    # -- log lines ---------------------------------------------------------------------
    def attempt_log(self) -> AttemptLog | None:
        """This attempt's lines, made on the first (None: taken already, the attempt is
        over and a later line is not kept)."""
        log = self._attempt_log
        if log is None:
            with self._lock:
                if self._attempt_log is None and not self._log_taken:
                    self._attempt_log = AttemptLog()
                log = self._attempt_log
        return log

    def take_log(self) -> tuple[str | None, int]:
        """The lines kept, as JSON text (None: none), and how many were dropped; the
        log is closed (runner.completion takes them with the outcome)."""
        # No lock: a line racing this from a thread the handler left running is lost
        # either way, and most executions never logged.
        self._log_taken = True
        log = self._attempt_log
        return (None, 0) if log is None else log.take()

    # -- cancellation ------------------------------------------------------------------
    @property
    def cancel_requested(self) -> bool:
        return self._cancelled

    def wait_cancelled(self, seconds: float) -> bool:
        with self._lock:
            if self._cancelled:
                return True
            if self._cancel_event is None:
                self._cancel_event = threading.Event()
            event = self._cancel_event
        return event.wait(seconds)

    def request_cancel(self) -> None:
        """Ask the handler to stop (shutdown, abandonment, lost lease)."""
        self._signal_cancel()

    def cancel_by_operator(self) -> None:
        """The heartbeat saw `cancel_requested_at`: an operator or the API asked to stop."""
        self.operator_cancelled = True
        self._signal_cancel()

    def time_out(self) -> None:
        """The timeout passed: the execution ends `timeout` whatever the handler does."""
        self.timed_out = True
        self._signal_cancel()

    def _signal_cancel(self) -> None:
        """Set the cancel signal; the first time, also cancel a coroutine handler's task
        (once only: a handler cleaning up after CancelledError is not interrupted again
        by every later heartbeat)."""
        with self._lock:
            first = not self._cancelled
            self._cancelled = True
            event = self._cancel_event
        if event is not None:
            event.set()  # a waiter made it before the flag was set, under the same lock
        if first and self.on_cancel is not None:
            self.on_cancel()

    @property
    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def past_deadline(self) -> bool:
        """Whether the execution has run past its timeout (time_out() may not know yet)."""
        return self.deadline is not None and time.monotonic() > self.deadline

    def lost_lease(self, message: str) -> LeaseLost:
        """Note that a write found another execution owning the job (the handler should
        stop; whatever it returns is discarded) and return the LeaseLost to raise."""
        if self.learn_lease_lost():
            count_on(self.pool, ZOMBIE_LEASE, [self.type])
        self._signal_cancel()
        return LeaseLost(message)

    def learn_lease_lost(self) -> bool:
        """Mark the lease lost; True for the first to learn it (the heartbeat or one of
        the handler's writes), which counts the zombie execution."""
        with self._lock:
            first, self.lease_lost = not self.lease_lost, True
        return first

    def add_to_batch(self, jobs: Jobs, registry: Registry | None) -> list[int]:
        """Add members to this job's batch: in its business transaction if one is open
        (counted as it commits, with the outcome), else in a transaction of its own,
        committed now."""
        local = default_registry if registry is None else registry
        conn = self._tx_conn
        if conn is not None:
            ids = run_steps(JobStore(conn), batches.add_steps(
                jobs, self.batch_id, self.job_id, local, counted=False))
            self.batch_added += len(ids)
            return ids
        with self.pool.connection() as own:
            return run_steps(JobStore(own), batches.add_steps(
                jobs, self.batch_id, self.job_id, local, counted=True))

    async def add_to_batch_async(self, jobs: Jobs, registry: Registry | None) -> list[int]:
        """add_to_batch for a coroutine handler: in its async business transaction if open."""
        conn = self._atx_conn
        if conn is None:
            return await asyncio.to_thread(self.add_to_batch, jobs, registry)
        local = default_registry if registry is None else registry
        ids = await run_steps_async(AsyncJobStore(conn), batches.add_steps(
            jobs, self.batch_id, self.job_id, local, counted=False))
        self.batch_added += len(ids)
        return ids

    # -- progress and checkpoints ------------------------------------------------------
    def parent_results(self) -> dict[int, Any]:
        """What each parent of this job returned, by parent id (docs/guide/flows.md)."""
        with self.pool.connection() as conn:
            rows = JobStore(conn).rows(Q.flow_parent_results, {"job_id": self.job_id})
        return {parent_id: result for parent_id, _type, _status, result in rows}

    def stage_progress(self, value: dict[str, Any]) -> None:
        """Keep a progress report for the next write, as JSON text made now; one that
        cannot be stored is dropped with a warning (once per execution), and the one
        staged before it stands: progress is never worth failing the job for."""
        try:
            text = storable_json_text(value)
        except ValueError as exc:
            if not self._progress_refused:
                self._progress_refused = True
                log.warning("job %s: progress not recorded, it cannot be stored as JSON "
                            "(%s); the job goes on", self.job_id, exc,
                            extra=running_event("progress_refused", self))
            return
        with self._lock:
            self._pending_progress = text

    def stage_checkpoint(self, text: str) -> None:
        """Keep a checkpoint (JSON text, storable_json_text's) for the next write."""
        with self._lock:
            self._pending_checkpoint = text

    def take_pending(self) -> tuple[str | None, str | None]:
        """Progress and checkpoint not yet written, as JSON (for the heartbeat to flush)."""
        with self._lock:
            progress, checkpoint = self._pending_progress, self._pending_checkpoint
            self._pending_progress = self._pending_checkpoint = None
            self._last_write = time.monotonic()
        if progress is not None:
            # Progress is for people to read: stored redacted. The checkpoint is the
            # handler's own resume state and is kept as given (redacted on display).
            progress = json.dumps(sanitize_payload(json.loads(progress)))
        return progress, checkpoint

    def restore_pending(self, progress: str | None, checkpoint: str | None) -> None:
        """Put back values take_pending() handed out but nobody could write, unless newer
        ones were saved meanwhile."""
        with self._lock:
            if progress is not None and self._pending_progress is None:
                self._pending_progress = progress
            if checkpoint is not None and self._pending_checkpoint is None:
                self._pending_checkpoint = checkpoint

    @property
    def write_due(self) -> bool:
        """Whether write_progress() would write now (the throttle has passed)."""
        return time.monotonic() - self._last_write >= PROGRESS_WRITE_INTERVAL

    def write_progress(self, force: bool = False) -> None:
        """Write what is pending, at most every PROGRESS_WRITE_INTERVAL unless `force`;
        raises LeaseLost if another execution owns the job."""
        if not force and not self.write_due:
            return
        progress, checkpoint = self.take_pending()
        try:
            with self.pool.connection() as conn:
                row = JobStore(conn).first(Q.save_progress, {
                    "job_id": self.job_id, "execution_id": self.execution_id,
                    "progress": progress, "checkpoint": checkpoint,
                })
        except DB_UNREACHABLE as exc:
            # The database is away: keep the values for the worker's next heartbeat, which
            # also owns the lease. Progress is never worth failing the job for.
            self.restore_pending(progress, checkpoint)
            log.warning("job %s: could not write progress (%s); kept for later",
                             self.job_id, exc, extra={"action": "progress_deferred"})
            return
        if row is None:
            raise self.lost_lease(f"job {self.job_id}: execution {self.execution_id} "
                                  "lost its lease")
        if row[0]:
            self.cancel_by_operator()

    # -- business transaction ---------------------------------------------------------
    @property
    def transaction_conn(self) -> psycopg.Connection | None:
        """The handler's business transaction, if it opened one (ctx.transaction())."""
        return self._tx_conn

    def open_transaction(self) -> psycopg.Connection:
        if self._tx_conn is None:
            self._tx_cm = self.pool.connection()
            self._tx_conn = self._tx_cm.__enter__()
        return self._tx_conn

    def close_transaction(self, commit: bool) -> None:
        conn, cm = self._tx_conn, self._tx_cm
        if conn is None or cm is None:  # no transaction open (they are set together)
            return
        self._tx_conn = self._tx_cm = None
        self.batch_added = 0  # counted with the outcome it commits with, or rolled back
        try:
            if commit:
                conn.commit()
            else:
                try:
                    conn.rollback()
                except DB_UNREACHABLE:
                    pass  # the connection is gone, and its transaction with it
        finally:
            cm.__exit__(None, None, None)

    @property
    def async_transaction_conn(self) -> psycopg.AsyncConnection | None:
        """A coroutine handler's business transaction, if it opened one."""
        return self._atx_conn

    async def open_async_transaction(self) -> psycopg.AsyncConnection:
        if self._async_pool is None:
            raise RuntimeError("only a coroutine handler has an async transaction")
        if self._atx_conn is None:
            self._atx_cm = (await self._async_pool()).connection()
            self._atx_conn = await self._atx_cm.__aenter__()
        return self._atx_conn

    async def close_async_transaction(self, commit: bool) -> None:
        conn, cm = self._atx_conn, self._atx_cm
        if conn is None or cm is None:
            return
        self._atx_conn = self._atx_cm = None
        self.batch_added = 0
        try:
            if commit:
                await conn.commit()
            else:
                try:
                    await conn.rollback()
                except DB_UNREACHABLE:
                    pass  # the connection is gone, and its transaction with it
        finally:
            await cm.__aexit__(None, None, None)


class HandlerContext:
    """What JobContext and AsyncJobContext share: identity, cancellation, idempotency
    keys; the rest (the calls that wait) each has in its own kind. Its public attributes
    and its subclasses' together are HANDLER_API; the worker drives it through
    ExecutionControl."""

    def __init__(self, control: ExecutionControl, *, checkpoint: Any,
                 job_idempotency_key: str | None) -> None:
        self._control = control
        # The pool its own writes use. Test handlers (tests/apps) borrow it for their
        # bookkeeping; it is not part of the handler API.
        self._pool = control.pool
        # The job's key, or None: its type and id stand in, formatted on first use (most
        # handlers never ask for a key).
        self._job_idempotency_key = job_idempotency_key
        self.job_id = control.job_id
        self.execution_id = control.execution_id
        self.attempt = control.attempt
        self.max_attempts = control.max_attempts
        self.type = control.type
        self.queue = control.queue
        self.version = control.version
        #: How often earlier executions of this job snoozed it.
        self.snoozes = control.snoozes
        #: When the worker started this execution (a time.monotonic() reading).
        self.started = control.started
        #: The id of the batch this job is a member of (None: none).
        self.batch = control.batch_id
        self.checkpoint = checkpoint

    @functools.cached_property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose lines carry this job's id and execution id. Made on first use:
        most handlers never log, and building it for every job cost the drain ~1 µs a job."""
        return logging.LoggerAdapter(log, {"job_id": self.job_id,
                                           "execution_id": str(self.execution_id)})

    # -- cancellation ------------------------------------------------------------------
    @property
    def cancel_requested(self) -> bool:
        """True once an operator asked to cancel, the timeout passed, or the lease was lost."""
        return self._control.cancel_requested

    def snooze(self, seconds: float) -> NoReturn:
        """Put the job off for `seconds` without spending an attempt: ends this execution
        (raises Snooze; see worker/core/errors.py)."""
        raise Snooze(seconds)

    def raise_if_cancelled(self) -> None:
        if self._control.cancel_requested:
            raise JobCancelled(message="stop requested")

    @property
    def time_left(self) -> float | None:
        """Seconds until the type's timeout (None: no timeout)."""
        return self._control.time_left

    # -- progress (staged here; written by each kind's own call) ----------------------
    def _stage_progress(self, processed: int | None, total: int | None,
                        extra: dict[str, Any]) -> None:
        value = dict(extra)
        if processed is not None:
            value["processed"] = processed
        if total is not None:
            value["total"] = total
        self._control.stage_progress(value)

    def _stage_checkpoint(self, value: Any) -> None:
        # Encoded now, in the handler: a value that cannot be stored fails here, and a
        # change the handler makes to it afterwards does not reach the stored one.
        try:
            text = storable_json_text(value)
        except ValueError as exc:
            raise ValueError(f"save_checkpoint: the value cannot be stored as JSON: {exc}"
                             ) from None
        self.checkpoint = value
        self._control.stage_checkpoint(text)

    # -- idempotency -------------------------------------------------------------------
    def idempotency_key(self, *parts: Any) -> str:
        """A key naming this job's business operation, the same on every retry.

        Send it to providers that accept an Idempotency-Key so a retry after a lost
        response is recognised as the same operation.
        """
        base = self._job_idempotency_key or f"{self._control.type}:{self._control.job_id}"
        return ":".join([base, *map(str, parts)])


class JobContext(HandlerContext):
    """A thread handler's handle on its execution: identity, heartbeat, progress,
    checkpoints, cancellation, stable idempotency keys, the effects ledger and a business
    transaction. Its public attributes are HANDLER_API."""

    def wait_cancelled(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when cancellation is requested."""
        return self._control.wait_cancelled(seconds)

    # -- liveness and progress ---------------------------------------------------------
    def heartbeat(self) -> None:
        """Renew this execution's lease now; raises LeaseLost if another owns the job."""
        self._control.write_progress(force=True)

    def progress(self, processed: int | None = None, total: int | None = None,
                 **extra: Any) -> None:
        """Record how much work is done (shown in the console). Throttled; never required:
        a report that cannot be stored as JSON (a NaN, a datetime) is dropped with a
        warning, and the job goes on."""
        self._stage_progress(processed, total, extra)
        self._control.write_progress()

    def save_checkpoint(self, value: Any) -> None:
        """Remember where to resume after a crash. Call it only once the work before it is
        durable (committed), or a retry would skip work that was never saved. The value
        is encoded now (changing it afterwards changes nothing saved); one that cannot be
        stored as JSON (a NaN, a datetime) raises ValueError and is not saved."""
        self._stage_checkpoint(value)
        self._control.write_progress()

    def effect(self, key: str, *, provider_idempotent: bool = False) -> Effect:
        """The ledger entry for a business effect: see Effect."""
        return Effect(self._control, key, provider_idempotent)

    def parent_results(self) -> dict[int, Any]:
        """What this job's parents (`after=`) returned, by parent id; None for a parent
        that returned nothing (or did not complete: a run_anyway edge's)."""
        return self._control.parent_results()

    def add_to_batch(self, jobs: Jobs, *, registry: Registry | None = None) -> list[int]:
        """Add jobs (JobSpecs) to the batch this job is a member of; returns their ids.
        Inside `ctx.transaction()` they are written in it and commit with this job's
        outcome (a failed attempt adds nothing); else in a transaction of their own,
        committed now. EnqueueError if this job is in no batch."""
        return self._control.add_to_batch(jobs, registry)

    # -- business transaction ---------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """A psycopg connection in a transaction that commits together with the job's
        completion: if this execution lost its lease, the business writes roll back too."""
        conn = self._control.open_transaction()
        try:
            yield conn
        except BaseException:
            self._control.close_transaction(commit=False)
            raise


class Effect:
    """A business side effect recorded in `processed_effects`, so a repeated execution
    knows whether it already happened.

        eff = ctx.effect(ctx.idempotency_key("email"))
        if not eff.done:
            eff.complete(send_email(...))

    Entering reserves the key. If an earlier execution reserved it and never completed
    it, that execution may have crashed after the effect and before recording it: the
    outcome is unknown, so Effect raises AmbiguousOutcome (the job goes to `unknown`),
    unless `provider_idempotent=True` says the provider itself dedupes by this key, in
    which case repeating the call is safe and the reservation is taken over. An execution
    that no longer owns its job reserves and takes over nothing: it gets LeaseLost.
    """

    def __init__(self, control: ExecutionControl, key: str, provider_idempotent: bool):
        self._control = control
        self.key = storable_text(key)
        self.provider_idempotent = provider_idempotent
        self.done = False
        self.result: Any = None
        self._reserve()

    def _run(self, query: Query, **params: Any) -> list[tuple[Any, ...]]:
        c = self._control
        with c.pool.connection() as conn:
            return JobStore(conn).rows(query, {"key": self.key, "job_id": c.job_id,
                                               "execution_id": c.execution_id, **params})

    def _reserve(self) -> None:
        # Both statements act only while this execution owns the job: no row means a newer
        # execution holds it, and the ledger was left as it was.
        rows = self._run(Q.reserve_effect)
        if not rows:
            raise self._lease_lost()
        (key, _job, owner, state, result, fresh), = rows
        if key is None:
            # Another statement inserted the key after this one's snapshot was taken.
            raise RuntimeError(f"effect {self.key!r} was reserved concurrently; retry")
        if state == "done":
            self.done, self.result = True, result
        elif not fresh and owner != self._control.execution_id:
            if not self.provider_idempotent:
                raise AmbiguousOutcome(
                    f"effect {self.key!r} was started by an earlier execution that never "
                    "recorded its result: check the provider before retrying")
            rows = self._run(Q.take_over_effect)
            if not rows:
                raise self._lease_lost()
            if rows[0][0] is None:
                raise RuntimeError(f"effect {self.key!r} was completed or released while "
                                   "being taken over; retry")

    def _lease_lost(self) -> LeaseLost:
        c = self._control
        return c.lost_lease(f"effect {self.key!r}: execution {c.execution_id} "
                            f"no longer owns job {c.job_id}")

    def complete(self, result: Any = None) -> None:
        """Record that the effect happened (with its result, e.g. the provider's id); a
        result that cannot be stored as JSON (a NaN, a datetime) raises ValueError before
        anything is written, and the effect stays reserved."""
        try:
            text = storable_json_text(result)
        except ValueError as exc:
            raise ValueError(f"effect {self.key!r}: the result cannot be stored as JSON: "
                             f"{exc}") from None
        if not self._run(Q.complete_effect, result=text):
            raise LeaseLost(f"effect {self.key!r} is no longer reserved by this execution")
        self.done, self.result = True, result

    def release(self) -> None:
        """Forget the reservation: the effect certainly did not happen."""
        self._run(Q.release_effect)


class AsyncJobContext(HandlerContext):
    """A coroutine handler's `ctx`: JobContext's API (HANDLER_API, the same names), with
    the calls that wait being coroutines — `await ctx.heartbeat()`, `await
    ctx.progress(...)`, `await ctx.save_checkpoint(...)`, `await ctx.wait_cancelled(s)`,
    `await ctx.effect(key)` and `async with ctx.transaction() as conn` (a psycopg
    AsyncConnection). Its own writes (progress, the effects ledger) are JobContext's
    statements run on a thread (asyncio.to_thread), so both kinds of handler share one
    path to the database and the loop never waits on them. Besides `cancel_requested`,
    the worker cancels the handler's task when it asks it to stop (CancelledError at
    its next await)."""

    async def wait_cancelled(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when cancellation is requested."""
        end = time.monotonic() + seconds
        while not self._control.cancel_requested:
            left = end - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(left, 0.05))
        return True

    # -- liveness and progress ---------------------------------------------------------
    async def heartbeat(self) -> None:
        """Renew this execution's lease now; raises LeaseLost if another owns the job."""
        await asyncio.to_thread(self._control.write_progress, True)

    async def progress(self, processed: int | None = None, total: int | None = None,
                       **extra: Any) -> None:
        """Record how much work is done (throttled as JobContext.progress)."""
        self._stage_progress(processed, total, extra)
        if self._control.write_due:
            await asyncio.to_thread(self._control.write_progress)

    async def save_checkpoint(self, value: Any) -> None:
        """Remember where to resume after a crash (see JobContext.save_checkpoint)."""
        self._stage_checkpoint(value)
        if self._control.write_due:
            await asyncio.to_thread(self._control.write_progress)

    async def effect(self, key: str, *, provider_idempotent: bool = False) -> AsyncEffect:
        """The ledger entry for a business effect (see Effect): `eff = await
        ctx.effect(key)`, then `await eff.complete(result)` once it happened."""
        return AsyncEffect(await asyncio.to_thread(
            Effect, self._control, key, provider_idempotent))

    async def parent_results(self) -> dict[int, Any]:
        """What this job's parents returned (see JobContext.parent_results)."""
        return await asyncio.to_thread(self._control.parent_results)

    async def add_to_batch(self, jobs: Jobs, *,
                           registry: Registry | None = None) -> list[int]:
        """Add jobs to this job's batch (see JobContext.add_to_batch): inside `async with
        ctx.transaction()`, in it."""
        return await self._control.add_to_batch_async(jobs, registry)

    # -- business transaction ---------------------------------------------------------
    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A psycopg AsyncConnection in a transaction that commits together with the
        job's completion (see JobContext.transaction)."""
        conn = await self._control.open_async_transaction()
        try:
            yield conn
        except BaseException:
            await self._control.close_async_transaction(commit=False)
            raise


class AsyncEffect:
    """Effect for a coroutine handler: the same ledger, its writes awaited."""

    def __init__(self, effect: Effect) -> None:
        self._effect = effect
        self.key = effect.key
        self.provider_idempotent = effect.provider_idempotent

    @property
    def done(self) -> bool:
        return self._effect.done

    @property
    def result(self) -> Any:
        return self._effect.result

    async def complete(self, result: Any = None) -> None:
        await asyncio.to_thread(self._effect.complete, result)

    async def release(self) -> None:
        await asyncio.to_thread(self._effect.release)
