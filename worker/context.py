"""What a handler sees: `ctx`, its view of the one execution it is running."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NoReturn
from uuid import UUID

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from .errors import AmbiguousOutcome, JobCancelled, Snooze
from .event_totals import ZOMBIE_LEASE, count_on
from .queries import Q
from .sanitize import sanitize_payload
from .storable import storable_json, storable_text

log = logging.getLogger("jobwarden.job")

#: Minimum seconds between two writes of progress/checkpoint for one execution; values
#: saved in between are kept in memory and flushed by the next heartbeat or outcome.
PROGRESS_WRITE_INTERVAL = 2.0


class LeaseLost(Exception):
    """This execution no longer owns its job (its lease expired and it was recovered)."""


class JobContext:
    """The handler's handle on its execution: identity, heartbeat, progress, checkpoints,
    cancellation, stable idempotency keys, the effects ledger and a business transaction."""

    def __init__(self, *, pool: ConnectionPool, job_id: int, execution_id: UUID, attempt: int,
                 max_attempts: int, type: str, queue: str, version: int, checkpoint: Any = None,
                 job_idempotency_key: str | None = None, timeout: float | None = None,
                 snoozes: int = 0) -> None:
        self._pool = pool
        self.job_id = job_id
        self.execution_id = execution_id
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.type = type
        self.queue = queue
        self.version = version
        self.checkpoint = checkpoint
        self.job_idempotency_key = job_idempotency_key
        #: How often earlier executions of this job snoozed it.
        self.snoozes = snoozes
        self.started = time.monotonic()
        self.deadline = None if timeout is None else self.started + timeout
        self.log = logging.LoggerAdapter(log, {"job_id": job_id, "execution_id": str(execution_id)})
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self.timed_out = False
        self.operator_cancelled = False
        self.lease_lost = False
        self._pending_progress: dict[str, Any] | None = None
        self._pending_checkpoint: Any = None
        self._has_pending_checkpoint = False
        self._last_write = 0.0
        # the business transaction, committed with the outcome, and the pool's checkout
        # that holds its connection
        self._tx_conn: psycopg.Connection | None = None
        self._tx_cm: AbstractContextManager[psycopg.Connection] | None = None

    # -- cancellation ------------------------------------------------------------------
    @property
    def cancel_requested(self) -> bool:
        """True once an operator asked to cancel, the timeout passed, or the lease was lost."""
        return self._cancel.is_set()

    def snooze(self, seconds: float) -> NoReturn:
        """Put the job off for `seconds` without spending an attempt: ends this execution
        (raises Snooze; see worker/errors.py)."""
        raise Snooze(seconds)

    def raise_if_cancelled(self) -> None:
        if self._cancel.is_set():
            raise JobCancelled(message="stop requested")

    def wait_cancelled(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when cancellation is requested."""
        return self._cancel.wait(seconds)

    def _request_cancel(self) -> None:
        self._cancel.set()

    def cancel_by_operator(self) -> None:
        """The heartbeat saw `cancel_requested_at`: an operator or the API asked to stop."""
        self.operator_cancelled = True
        self._cancel.set()

    @property
    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    # -- liveness and progress ---------------------------------------------------------
    def heartbeat(self) -> None:
        """Renew this execution's lease now; raises LeaseLost if another owns the job."""
        self._write_progress(force=True)

    def progress(self, processed: int | None = None, total: int | None = None,
                 **extra: Any) -> None:
        """Record how much work is done (shown in the console). Throttled; never required."""
        value = dict(extra)
        if processed is not None:
            value["processed"] = processed
        if total is not None:
            value["total"] = total
        with self._lock:
            self._pending_progress = value
        self._write_progress()

    def save_checkpoint(self, value: Any) -> None:
        """Remember where to resume after a crash. Call it only once the work before it is
        durable (committed), or a retry would skip work that was never saved."""
        json.dumps(value)  # fail here, in the handler, if it is not JSON
        with self._lock:
            self.checkpoint = value
            self._pending_checkpoint = value
            self._has_pending_checkpoint = True
        self._write_progress()

    def take_pending(self) -> tuple[str | None, str | None]:
        """Progress and checkpoint not yet written, as JSON (for the heartbeat to flush)."""
        with self._lock:
            # Progress is for people to read: stored redacted. The checkpoint is the
            # handler's own resume state and is kept as given (redacted on display).
            progress = (None if self._pending_progress is None
                        else json.dumps(sanitize_payload(storable_json(self._pending_progress))))
            checkpoint = (json.dumps(storable_json(self._pending_checkpoint))
                          if self._has_pending_checkpoint else None)
            self._pending_progress = None
            self._has_pending_checkpoint = False
            self._last_write = time.monotonic()
        return progress, checkpoint

    def restore_pending(self, progress: str | None, checkpoint: str | None) -> None:
        """Put back values take_pending() handed out but nobody could write, unless newer
        ones were saved meanwhile."""
        with self._lock:
            if progress is not None and self._pending_progress is None:
                self._pending_progress = json.loads(progress)
            if checkpoint is not None and not self._has_pending_checkpoint:
                self._pending_checkpoint = json.loads(checkpoint)
                self._has_pending_checkpoint = True

    def _write_progress(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._last_write < PROGRESS_WRITE_INTERVAL:
            return
        progress, checkpoint = self.take_pending()
        try:
            with self._pool.connection() as conn:
                row = conn.execute(Q.save_progress, {
                    "job_id": self.job_id, "execution_id": self.execution_id,
                    "progress": progress, "checkpoint": checkpoint,
                }).fetchone()
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            # The database is away: keep the values for the worker's next heartbeat, which
            # also owns the lease. Progress is never worth failing the job for.
            self.restore_pending(progress, checkpoint)
            log.warning("job %s: could not write progress (%s); kept for later",
                             self.job_id, exc, extra={"action": "progress_deferred"})
            return
        if row is None:
            raise self._lost_lease(f"job {self.job_id}: execution {self.execution_id} "
                                   "lost its lease")
        if row[0]:
            self.cancel_by_operator()

    def _lost_lease(self, message: str) -> LeaseLost:
        """Note that a write found another execution owning the job (the handler should
        stop; whatever it returns is discarded) and return the LeaseLost to raise."""
        if self._learn_lease_lost():
            count_on(self._pool, ZOMBIE_LEASE, [self.type])
        self._cancel.set()
        return LeaseLost(message)

    def _learn_lease_lost(self) -> bool:
        """Mark the lease lost; True for the first to learn it (the heartbeat or one of
        the handler's writes), which counts the zombie execution."""
        with self._lock:
            first, self.lease_lost = not self.lease_lost, True
        return first

    # -- idempotency -------------------------------------------------------------------
    def idempotency_key(self, *parts: Any) -> str:
        """A key naming this job's business operation, the same on every retry.

        Send it to providers that accept an Idempotency-Key so a retry after a lost
        response is recognised as the same operation.
        """
        base = self.job_idempotency_key or f"{self.type}:{self.job_id}"
        return ":".join([base, *map(str, parts)])

    def effect(self, key: str, *, provider_idempotent: bool = False) -> Effect:
        """The ledger entry for a business effect: see Effect."""
        return Effect(self, key, provider_idempotent)

    # -- business transaction ---------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """A psycopg connection in a transaction that commits together with the job's
        completion: if this execution lost its lease, the business writes roll back too."""
        if self._tx_conn is None:
            self._tx_cm = self._pool.connection()
            self._tx_conn = self._tx_cm.__enter__()
        try:
            yield self._tx_conn
        except BaseException:
            self.close_transaction(commit=False)
            raise

    def close_transaction(self, commit: bool) -> None:
        conn, cm = self._tx_conn, self._tx_cm
        if conn is None or cm is None:  # no transaction open (they are set together)
            return
        self._tx_conn = self._tx_cm = None
        try:
            if commit:
                conn.commit()
            else:
                try:
                    conn.rollback()
                except (psycopg.OperationalError, psycopg.InterfaceError):
                    pass  # the connection is gone, and its transaction with it
        finally:
            cm.__exit__(None, None, None)


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

    def __init__(self, ctx: JobContext, key: str, provider_idempotent: bool):
        self.ctx = ctx
        self.key = storable_text(key)
        self.provider_idempotent = provider_idempotent
        self.done = False
        self.result: Any = None
        self._reserve()

    def _run(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        with self.ctx._pool.connection() as conn:
            cur = conn.execute(sql, {"key": self.key, "job_id": self.ctx.job_id,
                                     "execution_id": self.ctx.execution_id, **params})
            # release_effect returns no rows: fetching them would raise, and roll it back.
            return cur.fetchall() if cur.description is not None else []

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
        elif not fresh and owner != self.ctx.execution_id:
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
        return self.ctx._lost_lease(f"effect {self.key!r}: execution {self.ctx.execution_id} "
                                    f"no longer owns job {self.ctx.job_id}")

    def complete(self, result: Any = None) -> None:
        """Record that the effect happened (with its result, e.g. the provider's id)."""
        if not self._run(Q.complete_effect, result=json.dumps(storable_json(result))):
            raise LeaseLost(f"effect {self.key!r} is no longer reserved by this execution")
        self.done, self.result = True, result

    def release(self) -> None:
        """Forget the reservation: the effect certainly did not happen."""
        self._run(Q.release_effect)
