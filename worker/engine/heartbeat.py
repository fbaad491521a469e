"""The heartbeat duty: keeps every lease this worker holds alive, in one statement.

Each interval it renews, guarded by `(status = 'running', execution_id)`:
- the executions running in slots (flushing their throttled progress and checkpoints);
- the claimed jobs still waiting in the producers' buffers;
- the outcomes waiting in the completer's buffer;
in every lane, and the worker's own `job_workers` row. From the answer it learns which executions it
no longer owns (recovered elsewhere while this process was frozen or cut off) and which
an operator asked to cancel. A value PostgreSQL refuses in one job's progress or
checkpoint costs no job its lease: the beat goes again without them, and each job's is
then written on its own, a refused one dropped. It also enforces execution timeouts (on
this process's clock, so even while the database is unreachable) and runs recovery of
other workers' lost jobs every `recovery_interval`.

It beats on a connection of its own, not a pool's: after an outage a pool reconnects
on a backoff of its own that doubles without a cap (psycopg_pool: 1 s, 2 s, 4 s, ...),
and for up to ~19 s after a restart a worker's claims went through while every beat
failed, so that the leases of the jobs it claimed lapsed under it and the jobs ran twice
(issue 35). Here a failed beat drops its connection and the next one connects again
after a wait that doubles from half a second to one interval at most, like a claim's.
The producers claim only while the beats go through (`renewing`): a job is claimed only
when its lease can be renewed.
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

from jobwarden.worker.core import lease
from jobwarden.worker.core.dberrors import DB_UNREACHABLE, Backoff
from jobwarden.worker.core.logs import running_event
from jobwarden.worker.core.states import WorkerState
from jobwarden.worker.engine.completer import Completer
from jobwarden.worker.engine.context import ExecutionControl
from jobwarden.worker.engine.executor import Execution, Executor
from jobwarden.worker.store.db import DedicatedConnection
from jobwarden.worker.store.event_totals import ZOMBIE_LEASE, count
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q, batch_params, describe_db_error

log = logging.getLogger("jobwarden.heartbeat")



class Heartbeat:
    """Renews leases and the worker row; learns cancellations and losses; recovers."""

    def __init__(self, *, conn: DedicatedConnection, worker_id: str,
                 executors: list[Executor], completer: Completer, interval: float,
                 recovery_interval: float, recover: Callable[[psycopg.Connection], dict[str, int]],
                 draining: Callable[[], bool], on_recovered: Callable[[], None],
                 on_renewing: Callable[[], None] | None = None) -> None:
        #: Its own connection (module docstring); the lock keeps a recovery pass asked for
        #: from another thread (recover_once) out of a beat's transaction.
        self._conn = conn
        self._conn_lock = threading.Lock()
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
        #: Told when beats go through again after none did (the producers claim again).
        self._on_renewing = on_renewing or (lambda: None)
        #: The waits between failed beats: from half a second to one interval at most.
        self._backoff = Backoff(first=min(0.5, interval), cap=interval)
        #: When (lease clock) the last beat that went through was sent; None while the
        #: last one failed, and before the first.
        self._renewed_at: float | None = None
        #: Set by ask_beat(): beat now rather than at the end of the interval.
        self._asked = threading.Event()

    def renewing(self, since: float | None = None) -> bool:
        """Whether the beats go through, so that a job claimed now keeps its lease: the
        last beat did, and (`since`, lease clock) it was sent no earlier than that."""
        renewed = self._renewed_at
        return renewed is not None and (since is None or renewed >= since)

    def ask_beat(self) -> None:
        """Beat now, not at the end of the interval (a producer that lost its connection
        waits for a beat sent since). A failed beat's backoff is kept all the same."""
        self._asked.set()

    def run(self, closing: threading.Event) -> None:
        def end_the_wait() -> None:  # `closing` ends the wait between beats as an ask does
            closing.wait()
            self._asked.set()

        threading.Thread(target=end_the_wait, name="heartbeat-closing", daemon=True).start()
        next_recovery = 0.0
        while not closing.is_set():
            asked = self._asked.is_set()
            self._asked.clear()
            renewed = self._beat_once(asked)
            # Not while the beats fail: the pass would only try the same server again.
            if renewed and time.monotonic() >= next_recovery and not self._draining():
                next_recovery = time.monotonic() + self.recovery_interval
                self.recover_once()
            if renewed:
                self._asked.wait(self.interval)
            else:
                closing.wait(self._backoff.next())
        with self._conn_lock:
            self._conn.drop()

    def _beat_once(self, asked: bool = False) -> bool:
        """One beat, its failure logged; whether it went through. One that goes through
        after a failed one, or that a producer asked for, tells the producers."""
        was_renewing = self._renewed_at is not None
        try:
            self.beat()
        except Exception as exc:
            self._renewed_at = None
            if isinstance(exc, DB_UNREACHABLE):
                with self._conn_lock:
                    self._conn.drop()  # the next beat connects again
                log.warning("heartbeat failed (%s); retrying in %.1fs", exc,
                            self._backoff.current,
                            extra={"action": "heartbeat_failed",
                                   "retry_in": self._backoff.current})
            else:
                log.exception("heartbeat error")
            return False
        self._backoff.reset()
        if asked or not was_renewing:
            self._on_renewing()
        return True

    def recover_once(self) -> dict[str, int]:
        """One recovery pass over every worker's expired leases."""
        try:
            with self._conn_lock:
                counts = self._recover(self._conn.get())
            if counts.get("pending"):
                self._on_recovered()
            return counts
        except DB_UNREACHABLE as exc:
            with self._conn_lock:
                self._conn.drop()
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
        # The worst lag since the last beat, for the worker's row (the watchdog logs a
        # stall while it lasts; worker/engine/watchdog.py).
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
            owned, sent = self._renew(rows, lag_ms)
        except DB_UNREACHABLE:
            self._put_back(taken)  # not written: keep them for the next beat
            raise
        except psycopg.Error as exc:
            if not any(p is not None or c is not None for _, p, c in taken):
                raise
            # PostgreSQL refused a value it was sent (one job's progress or checkpoint):
            # it must not cost the other jobs their leases, nor come back at every beat.
            log.warning("heartbeat refused (%s): renewing the leases without progress "
                        "and checkpoints, then writing each job's on its own",
                        describe_db_error(exc), extra={"action": "heartbeat_refused"})
            for row in rows.values():
                row.pop("progress", None)
                row.pop("checkpoint", None)
            try:
                owned, sent = self._renew(rows, lag_ms)
            except BaseException:
                self._put_back(taken)
                raise
            self._write_each(taken, owned)
        except BaseException:
            self._put_back(taken)
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
        if zombies:
            try:
                with self._conn_lock:
                    count(self._conn.get(), ZOMBIE_LEASE, zombies)
            except DB_UNREACHABLE as exc:  # the leases were renewed: only the count is lost
                with self._conn_lock:
                    self._conn.drop()
                log.warning("could not count %d %s event(s): %s", len(zombies),
                            ZOMBIE_LEASE, exc)

    def _renew(self, rows: dict[UUID, dict[str, Any]],
               lag_ms: float | None) -> tuple[dict[UUID, bool], float]:
        """The beat's statements, in one transaction: the leases of `rows` (with their
        progress and checkpoints) and the worker's row. Returns the executions still
        owned (execution id -> cancel requested) and when the beat was sent."""
        with self._conn_lock:
            conn = self._conn.get()
            store = JobStore(conn)
            owned: dict[UUID, bool] = {}
            sent = lease.now()  # the leases renewed now start no earlier than this
            with conn.transaction():
                if rows:
                    owned = {r[1]: r[2] for r in store.rows(
                        Q.heartbeat_executions,
                        batch_params(list(rows.values()), id_key="id"))}
                state = WorkerState.DRAINING if self._draining() else WorkerState.RUNNING
                store.rows(Q.worker_heartbeat, {"worker_id": self.worker_id,
                                                "state": state, "loop_lag_ms": lag_ms})
            self._renewed_at = sent
        return owned, sent

    @staticmethod
    def _put_back(taken: list[tuple[Execution, str | None, str | None]]) -> None:
        for ex, progress, checkpoint in taken:
            ex.control.restore_pending(progress, checkpoint)

    def _write_each(self, taken: list[tuple[Execution, str | None, str | None]],
                    owned: dict[UUID, bool]) -> None:
        """After a refused beat: each owned execution's progress and checkpoint in a
        statement of its own (each alone if the two are refused together), so that only
        a value refused again is lost (dropped, and said so: put back, it would be
        refused at every beat)."""
        for i, (ex, progress, checkpoint) in enumerate(taken):
            control = ex.control
            if (progress is None and checkpoint is None) or control.execution_id not in owned:
                continue
            try:
                refused = self._refused(control, progress, checkpoint)
                if refused is not None and progress is not None and checkpoint is not None:
                    alone = (self._refused(control, progress, None),
                             self._refused(control, None, checkpoint))
                    refused = "; ".join(r for r in alone if r is not None) or None
            except DB_UNREACHABLE as exc:  # the leases were renewed: the rest waits
                with self._conn_lock:
                    self._conn.drop()
                self._put_back(taken[i:])
                log.warning("heartbeat: could not write progress (%s); kept for later", exc,
                            extra={"action": "progress_deferred"})
                return
            if refused is not None:
                log.warning("job %s: PostgreSQL refused its %s; dropped", control.job_id,
                            refused, extra=running_event("progress_dropped", control))

    def _refused(self, control: ExecutionControl, progress: str | None,
                 checkpoint: str | None) -> str | None:
        """Write one execution's progress and checkpoint; None once written, else what
        PostgreSQL refused and why (its error's class, never the value)."""
        try:
            with self._conn_lock:
                conn = self._conn.get()
                with conn.transaction():
                    JobStore(conn).first(Q.save_progress, {
                        "job_id": control.job_id, "execution_id": control.execution_id,
                        "progress": progress, "checkpoint": checkpoint})
        except DB_UNREACHABLE:
            raise
        except psycopg.Error as exc:
            what = ("progress" if checkpoint is None else "checkpoint" if progress is None
                    else "progress and checkpoint")
            return f"{what} ({describe_db_error(exc)})"
        return None

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
