"""The heartbeat duty: keeps every lease this worker holds alive, in one statement.

Each interval it renews, guarded by `(status = 'running', execution_id)`:
- the executions running in slots (flushing their throttled progress and checkpoints);
- the claimed jobs still waiting in the producers' buffers;
- the outcomes waiting in the completer's buffer;
in every lane, and the worker's own `job_workers` row. From the answer it learns which executions it
no longer owns (recovered elsewhere while this process was frozen or cut off) and which
an operator asked to cancel. It also enforces execution timeouts (on this process's
clock, so even while the database is unreachable) and runs recovery of other workers'
lost jobs every `recovery_interval`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
from psycopg_pool import ConnectionPool

from worker.core import lease
from worker.core.dberrors import DB_UNREACHABLE
from worker.core.logs import running_event
from worker.core.states import WorkerState
from worker.engine.completer import Completer
from worker.engine.executor import Execution, Executor
from worker.store.event_totals import ZOMBIE_LEASE, count_on
from worker.store.jobstore import JobStore
from worker.store.queries import Q, batch_params

log = logging.getLogger("jobwarden.heartbeat")



class Heartbeat:
    """Renews leases and the worker row; learns cancellations and losses; recovers."""

    def __init__(self, *, control_pool: ConnectionPool, worker_id: str,
                 executors: list[Executor], completer: Completer, interval: float,
                 recovery_interval: float, recover: Callable[[psycopg.Connection], dict[str, int]],
                 draining: Callable[[], bool], on_recovered: Callable[[], None]) -> None:
        self.control_pool = control_pool
        self.worker_id = worker_id
        self.executors = executors  # one per lane, each with its buffer
        self.completer = completer
        self.interval = interval
        self.recovery_interval = recovery_interval
        # One recovery pass of every worker's expired leases (worker/duties/recovery.py),
        # given by the process: the engine does not import the duties.
        self._recover = recover
        self._draining = draining
        self._on_recovered = on_recovered

    def run(self, closing: threading.Event) -> None:
        next_recovery = 0.0
        while not closing.is_set():
            try:
                self.beat()
            except DB_UNREACHABLE as exc:
                log.warning("heartbeat failed: %s", exc, extra={"action": "heartbeat_failed"})
            except Exception:
                log.exception("heartbeat error")
            for executor in self.executors:
                executor.enforce_timeouts()
            if time.monotonic() >= next_recovery and not self._draining():
                next_recovery = time.monotonic() + self.recovery_interval
                self.recover_once()
            closing.wait(self.interval)

    def recover_once(self) -> dict[str, int]:
        """One recovery pass over every worker's expired leases."""
        try:
            with self.control_pool.connection() as conn:
                counts = self._recover(conn)
            if counts.get("pending"):
                self._on_recovered()
            return counts
        except DB_UNREACHABLE as exc:
            log.warning("recovery pass failed: %s", exc)
            return {}

    def beat(self) -> None:
        """Renew every lease this worker holds and its own row."""
        live = [ex for executor in self.executors for ex in executor.running()
                if not ex.abandoned]
        buffered = [(executor.buffer, executor.buffer.snapshot()) for executor in self.executors]
        waiting = [job for _, jobs in buffered for job in jobs]
        completing = self.completer.pending()
        rows: dict[UUID, dict[str, Any]] = {}
        taken = []
        # Checked here, on this thread: a lane loop stalled by a blocking handler must
        # be seen while it is stalled, and must not hold up this beat.
        lags = [lag for executor in self.executors if (lag := executor.loop_lag()) is not None]
        lag_ms = round(max(lags) * 1000, 1) if lags else None
        for c in completing:
            rows[c.execution_id] = {"id": c.job_id, "execution_id": str(c.execution_id)}
        for job in waiting:
            rows[job.execution_id] = {"id": job.id, "execution_id": str(job.execution_id)}
        for ex in live:
            progress, checkpoint = ex.control.take_pending()
            taken.append((ex, progress, checkpoint))
            rows[ex.control.execution_id] = {
                "id": ex.control.job_id, "execution_id": str(ex.control.execution_id),
                "progress": None if progress is None else json.loads(progress),
                "checkpoint": None if checkpoint is None else json.loads(checkpoint)}
        try:
            with self.control_pool.connection() as conn:
                store = JobStore(conn)
                owned: dict[UUID, bool] = {}  # execution id -> cancel requested
                sent = lease.now()  # the leases renewed now start no earlier than this
                if rows:
                    owned = {r[1]: r[2] for r in store.rows(
                        Q.heartbeat_executions, batch_params(list(rows.values()), id_key="id"))}
                state = WorkerState.DRAINING if self._draining() else WorkerState.RUNNING
                store.rows(Q.worker_heartbeat, {"worker_id": self.worker_id, "state": state,
                                                "loop_lag_ms": lag_ms})
        except BaseException:
            for ex, progress, checkpoint in taken:  # not written: keep them for the next beat
                ex.control.restore_pending(progress, checkpoint)
            raise
        zombies = []  # the types of the executions that learn now that their lease is gone
        for buffer, jobs in buffered:
            for job in jobs:
                if job.execution_id in owned:
                    job.granted_at = sent
                    if owned[job.execution_id]:
                        job.cancel_requested = True
            # Not renewed: lost, if it still waits. A slot may have taken it since the
            # buffer was read, run it and written its outcome: that one is done, not a
            # zombie (issue 35: hundreds counted in a drain of short jobs).
            gone = [job for job in jobs if job.execution_id not in owned]
            if gone:
                zombies += [job.type for job in buffer.mark_lost(gone)]
        for ex in live:
            if self._learn(ex, owned):
                zombies.append(ex.control.type)
        count_on(self.control_pool, ZOMBIE_LEASE, zombies)

    @staticmethod
    def _learn(ex: Execution, owned: dict[UUID, bool]) -> bool:
        """Tell the execution what the beat found; True if it learns its lease is gone."""
        eid = ex.control.execution_id
        if eid not in owned:
            if ex.recording or ex.abandoned:
                return False  # it finished (or was let go) while the heartbeat ran
            if ex.control.learn_lease_lost():
                ex.control.request_cancel()
                log.warning("job %s: lease lost (execution %s was recovered elsewhere); "
                            "its result will be discarded", ex.control.job_id, eid,
                            extra=running_event("lease_lost", ex.control))
                return True
        elif owned[eid]:
            if not ex.control.cancel_requested:
                log.info("job %s: cancellation requested", ex.control.job_id,
                         extra=running_event("cancel_requested", ex.control))
            ex.control.cancel_by_operator()
        return False
