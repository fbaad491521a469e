"""The worker process: a pool of execution slots fed by claims, kept honest by heartbeats.

Threads, each with one duty:
- main: claims jobs while slots are free; sleeps until LISTEN/NOTIFY, a freed slot or
  the poll interval (the fallback that always works) wakes it.
- listener: holds a LISTEN connection and wakes the main thread; reconnects with backoff.
- heartbeat: renews every running lease in one statement, learns cancellations and
  lost leases from the answer, enforces execution timeouts, flushes progress, renews
  the worker's own row, and runs recovery of other workers' lost jobs.
- one thread per running job.

SIGTERM/SIGINT: stop claiming, let running jobs finish within `grace`, hand the rest
back to pending, exit 0. A second signal forces the hand-back at once.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from . import runner
from .context import JobContext
from .db import database_url
from .job_types import publish_job_types
from .listener import listen_for_jobs
from .queries import Q
from .recovery import mark_gone_workers, recover_stale_running
from .registry import JobType, Registry
from .registry import registry as default_registry

log = logging.getLogger("jobwarden.worker")

DB_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("jobwarden")
    except Exception:
        return "dev"


@dataclass
class Execution:
    job_type: JobType
    ctx: JobContext
    payload: dict
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    abandoned: bool = False  # the worker gave up on it (timeout, shutdown): ignore its result
    recording: bool = False  # its outcome is being written: too late to abandon
    timeout_noticed: float | None = None


class WorkerProcess:
    def __init__(self, registry: Registry = default_registry, *, url: str | None = None,
                 queues: list[str] | None = None, concurrency: int = 4, grace: float = 30.0,
                 poll_interval: float = 2.0, heartbeat_interval: float | None = None,
                 recovery_interval: float | None = None, timeout_grace: float = 5.0,
                 max_abandoned: int | None = None, worker_id: str | None = None,
                 restart_on_abandon: bool = False):
        self.registry = registry
        self.types = list(registry)
        if not self.types:
            raise ValueError("no job types registered: --app must import your handlers")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.url = url or database_url()
        self.queues = queues or None
        self.concurrency = concurrency
        self.grace = grace
        self.poll_interval = poll_interval
        min_lease = min(t.lease for t in self.types)
        self.heartbeat_interval = heartbeat_interval or min(10.0, max(0.2, min_lease / 3))
        self.recovery_interval = recovery_interval or min(30.0, max(0.5, min_lease / 2))
        self.timeout_grace = timeout_grace
        # Another worker counts as gone after missing several of its heartbeats.
        self.worker_stale_after = max(5.0, 5 * self.heartbeat_interval)
        self.max_abandoned = concurrency if max_abandoned is None else max_abandoned
        self.restart_on_abandon = restart_on_abandon
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.pool: ConnectionPool | None = None
        self._executions: dict[uuid.UUID, Execution] = {}
        self._abandoned: list[Execution] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()  # stop claiming
        self._force = threading.Event()  # second signal: stop now
        self._closing = threading.Event()  # background threads exit
        self.restart_requested = False
        self.state = "running"

    # -- lifecycle ---------------------------------------------------------------------
    def request_stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM does)."""
        self._stop.set()
        self._wake.set()

    def _on_signal(self, signum, _frame) -> None:
        if self._stop.is_set():
            log.warning("second signal %s: stopping now", signum, extra={"action": "force_stop"})
            self._force.set()
        else:
            log.info("signal %s: draining (grace %ss)", signum, self.grace,
                     extra={"action": "drain_started"})
            self.request_stop()
        self._wake.set()

    def run(self) -> int:
        """Run until stopped; returns the process exit code."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        # Handlers may hold two connections each (ctx.transaction() plus progress or the
        # effect ledger), and abandoned threads keep theirs until they return.
        self.pool = ConnectionPool(
            self.url, min_size=1, max_size=2 * self.concurrency + 2, timeout=10, open=False,
            check=ConnectionPool.check_connection, kwargs={"connect_timeout": 5},
            name="jobwarden-worker")
        # Claims, heartbeats, recovery and hand-backs get their own connections: a lease
        # must never expire because busy handlers took every connection of the pool.
        self.control_pool = ConnectionPool(
            self.url, min_size=1, max_size=3, timeout=5, open=False,
            check=ConnectionPool.check_connection, kwargs={"connect_timeout": 5},
            name="jobwarden-control")
        self.pool.open(wait=False)
        self.control_pool.open(wait=False)
        self._register()
        threads = [threading.Thread(target=listen_for_jobs, name="listener", daemon=True,
                                    args=(self.url, self._wake, self._closing)),
                   threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)]
        for t in threads:
            t.start()
        log.info("worker %s started: types=%s queues=%s concurrency=%s", self.worker_id,
                 [t.name for t in self.types], self.queues or "all", self.concurrency,
                 extra={"action": "worker_started", "worker_id": self.worker_id})
        try:
            self._claim_loop()
            self._drain()
        finally:
            self._closing.set()
            for t in threads:
                t.join(timeout=5)
            self._set_stopped()
            self.control_pool.close(timeout=5)
            self.pool.close(timeout=5)
        log.info("worker %s stopped", self.worker_id, extra={"action": "worker_stopped"})
        if self.restart_requested and self.restart_on_abandon:
            log.warning("restarting: %d abandoned handler thread(s) still running",
                        len(self._abandoned), extra={"action": "worker_restart"})
            sys.stdout.flush()
            sys.stderr.flush()
            # The same command line again (`jobwarden worker ...` or `python -m worker.cli`).
            os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
        return 1 if self._force.is_set() else 0

    def _register(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                with self.control_pool.connection() as conn:
                    conn.execute(Q.register_worker, {
                        "worker_id": self.worker_id, "host": socket.gethostname(),
                        "pid": os.getpid(), "queues": self.queues or ["*"],
                        "job_types": [t.name for t in self.types],
                        "concurrency": self.concurrency, "version": _version()})
                    publish_job_types(conn, self.types, published_by=self.worker_id)
                return
            except DB_ERRORS as exc:
                log.warning("cannot register worker (%s); retrying in %.1fs", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10)

    def _set_stopped(self) -> None:
        try:
            with self.control_pool.connection(timeout=3) as conn:
                conn.execute(Q.worker_stopped, {"worker_id": self.worker_id})
        except DB_ERRORS as exc:
            log.warning("could not mark worker stopped: %s", exc)

    # -- claiming ----------------------------------------------------------------------
    def active(self) -> int:
        with self._lock:
            return len(self._executions)

    def _claim_loop(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            self._wake.clear()
            free = self.concurrency - self.active()
            if free > 0:
                try:
                    rows = self._claim(free)
                    backoff = 0.5
                except psycopg.errors.UniqueViolation:
                    # Another worker claimed a job of the same concurrency_key in the same
                    # instant; the index refused ours. Claim again: the key is now skipped.
                    log.debug("claim lost a concurrency_key race; claiming again")
                    continue
                except DB_ERRORS as exc:
                    log.warning("claim failed (%s); retrying in %.1fs", exc, backoff,
                                extra={"action": "db_unavailable"})
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 10)
                    continue
                for row in rows:
                    self._start(row)
                if len(rows) == free:
                    continue  # there may be more waiting: claim again when a slot frees
            self._wake.wait(self.poll_interval)

    def _claim(self, limit: int) -> list[tuple]:
        with self.control_pool.connection() as conn:
            return conn.execute(Q.claim_jobs, {
                "types": [t.name for t in self.types], "leases": [t.lease for t in self.types],
                "queues": self.queues, "limit": limit, "worker_id": self.worker_id,
            }).fetchall()

    def _start(self, row: tuple) -> None:
        (job_id, queue, type_name, version, payload, _prio, attempts, max_attempts,
         execution_id, checkpoint, idempotency_key) = row
        job_type = self.registry.get(type_name)
        assert job_type is not None, "claim_jobs only returns the types this worker handles"
        ctx = JobContext(pool=self.pool, job_id=job_id, execution_id=execution_id,
                         attempt=attempts, max_attempts=max_attempts, type=type_name,
                         queue=queue, version=version, checkpoint=checkpoint,
                         job_idempotency_key=idempotency_key, timeout=job_type.timeout)
        ex = Execution(job_type, ctx, payload)
        ex.thread = threading.Thread(target=self._run_execution, args=(ex,),
                                     name=f"job-{job_id}", daemon=True)
        with self._lock:
            self._executions[execution_id] = ex
        log.info("job %s %s claimed (attempt %s/%s)", job_id, type_name, attempts, max_attempts,
                 extra={"action": "job_claimed", "job_id": job_id, "job_type": type_name,
                        "execution_id": str(execution_id), "attempt": attempts})
        ex.thread.start()

    # -- executing ---------------------------------------------------------------------
    def _run_execution(self, ex: Execution) -> None:
        try:
            outcome = runner.execute(ex.job_type, ex.ctx, ex.payload)
            with ex.lock:
                if ex.abandoned:
                    log.warning("job %s: handler returned after being abandoned; result "
                                "discarded", ex.ctx.job_id, extra={"action": "result_discarded"})
                    ex.ctx.close_transaction(commit=False)
                    return
                ex.recording = True
            if outcome is None:
                log.warning("job %s: execution %s lost its lease; result discarded",
                            ex.ctx.job_id, ex.ctx.execution_id,
                            extra={"action": "result_discarded", "job_id": ex.ctx.job_id})
                return
            self._record_with_retry(ex, outcome)
        except Exception:
            log.exception("job %s: unexpected error in the runner", ex.ctx.job_id)
        finally:
            with self._lock:
                if self._executions.get(ex.ctx.execution_id) is ex:
                    del self._executions[ex.ctx.execution_id]
            self._wake.set()

    def _record_with_retry(self, ex: Execution, outcome: runner.Outcome) -> None:
        """Write the outcome, riding out a short database outage. If the outage outlasts
        the lease, recovery will have moved the job on and the write is moot."""
        give_up = time.monotonic() + max(ex.job_type.lease * 3, 10)
        backoff = 0.2
        while True:
            try:
                runner.record(self.pool, ex.ctx, outcome)
                return
            except runner.CommitUncertain as exc:
                log.warning("job %s: the database went away while committing its completion "
                            "(%s); scheduling a retry unless the commit went through",
                            ex.ctx.job_id, exc, extra={"action": "commit_uncertain",
                                                       "job_id": ex.ctx.job_id})
                outcome = runner.retry_or_fail(
                    ex.job_type, ex.ctx.attempt, ex.ctx.max_attempts, "DB_UNAVAILABLE",
                    f"connection lost while committing: {exc}")
            except DB_ERRORS as exc:
                if time.monotonic() > give_up or self._force.is_set():
                    log.error("job %s: could not record %s (%s); recovery will take over",
                              ex.ctx.job_id, outcome.outcome, exc,
                              extra={"action": "record_failed", "job_id": ex.ctx.job_id})
                    return
                time.sleep(backoff)
                backoff = min(backoff * 2, 5)

    def _abandon(self, ex: Execution, outcome: runner.Outcome | None) -> bool:
        """Stop waiting for a handler: free its slot and (unless outcome is None, as in a
        shutdown hand-back) record the outcome. Its thread's later result is ignored."""
        with ex.lock:
            if ex.recording or ex.abandoned:
                return False
            ex.abandoned = True
        ex.ctx._request_cancel()
        with self._lock:
            self._executions.pop(ex.ctx.execution_id, None)
            self._abandoned = [e for e in self._abandoned if e.thread and e.thread.is_alive()]
            if ex.thread and ex.thread.is_alive():
                self._abandoned.append(ex)
            piled_up = len(self._abandoned)
        if outcome is not None:
            try:
                runner.record(self.control_pool, ex.ctx, outcome, business_tx=False)
            except DB_ERRORS as exc:
                log.warning("job %s: could not record %s (%s); recovery will take over",
                            ex.ctx.job_id, outcome.outcome, exc)
        self._wake.set()
        if piled_up > self.max_abandoned and not self._stop.is_set():
            log.error("%d abandoned handler threads are still running (limit %d): restarting "
                      "the worker cleanly", piled_up, self.max_abandoned,
                      extra={"action": "abandoned_threads_limit"})
            self.restart_requested = True
            self.request_stop()
        return True

    # -- heartbeat, timeouts, recovery ------------------------------------------------
    def _heartbeat_loop(self) -> None:
        next_recovery = 0.0
        while not self._closing.is_set():
            with self._lock:
                live = [ex for ex in self._executions.values() if not ex.abandoned]
            try:
                self._beat(live)
            except DB_ERRORS as exc:
                log.warning("heartbeat failed: %s", exc, extra={"action": "heartbeat_failed"})
            except Exception:
                log.exception("heartbeat error")
            # Timeouts are measured on this process's clock: enforce them even while the
            # database is unreachable.
            self._enforce_timeouts(live)
            if time.monotonic() >= next_recovery and not self._stop.is_set():
                next_recovery = time.monotonic() + self.recovery_interval
                self.recover_once()
            self._closing.wait(self.heartbeat_interval)

    def recover_once(self) -> dict[str, int]:
        try:
            with self.control_pool.connection() as conn:
                counts = recover_stale_running(conn, self.registry)
                mark_gone_workers(conn, stale_after=self.worker_stale_after)
            if counts.get("pending"):
                self._wake.set()
            return counts
        except DB_ERRORS as exc:
            log.warning("recovery pass failed: %s", exc)
            return {}

    def _beat(self, live: list[Execution]) -> None:
        """Renew every live lease and this worker's row; learn cancellations and losses."""
        rows, taken = [], []
        for ex in live:
            progress, checkpoint = ex.ctx.take_pending()
            taken.append((ex, progress, checkpoint))
            rows.append({"id": ex.ctx.job_id, "execution_id": str(ex.ctx.execution_id),
                         "progress": None if progress is None else json.loads(progress),
                         "checkpoint": None if checkpoint is None else json.loads(checkpoint)})
        try:
            with self.control_pool.connection() as conn:
                owned = {}
                if rows:
                    owned = {r[1]: r[2] for r in conn.execute(
                        Q.heartbeat_executions, {"rows": json.dumps(rows)}).fetchall()}
                conn.execute(Q.worker_heartbeat, {"worker_id": self.worker_id,
                                                  "state": "draining" if self._stop.is_set()
                                                  else "running"})
        except BaseException:
            for ex, progress, checkpoint in taken:  # not written: keep them for the next beat
                ex.ctx.restore_pending(progress, checkpoint)
            raise
        for ex in live:
            eid = ex.ctx.execution_id
            if eid not in owned:
                if ex.recording or ex.abandoned:
                    continue  # it finished (or was let go) while the heartbeat ran
                if not ex.ctx.lease_lost:
                    ex.ctx.lease_lost = True
                    ex.ctx._request_cancel()
                    log.warning("job %s: lease lost (execution %s was recovered elsewhere); "
                                "its result will be discarded", ex.ctx.job_id, eid,
                                extra={"action": "lease_lost", "job_id": ex.ctx.job_id})
            elif owned[eid]:
                if not ex.ctx.cancel_requested:
                    log.info("job %s: cancellation requested", ex.ctx.job_id,
                             extra={"action": "cancel_requested", "job_id": ex.ctx.job_id})
                ex.ctx.cancel_by_operator()

    def _enforce_timeouts(self, live: list[Execution]) -> None:
        now = time.monotonic()
        for ex in live:
            left = ex.ctx.time_left
            if left is None or left > 0 or ex.ctx.lease_lost:
                continue
            if ex.timeout_noticed is None:
                # First ask the handler to stop (ctx.cancel_requested turns true) ...
                ex.timeout_noticed = now
                ex.ctx.timed_out = True
                ex.ctx._request_cancel()
                log.warning("job %s exceeded its %ss timeout: asking it to stop",
                            ex.ctx.job_id, ex.job_type.timeout,
                            extra={"action": "job_timeout", "job_id": ex.ctx.job_id})
            elif now - ex.timeout_noticed >= self._timeout_grace_for(ex):
                # ... then stop waiting for it: the slot is freed, the retry scheduled.
                outcome = runner.classify(None, ex.ctx, ex.job_type)
                if self._abandon(ex, outcome):
                    log.warning("job %s ignored its timeout: abandoned (%s)", ex.ctx.job_id,
                                outcome.status, extra={"action": "job_abandoned",
                                                       "job_id": ex.ctx.job_id})

    def _timeout_grace_for(self, ex: Execution) -> float:
        """How long a timed-out handler gets to stop: `timeout_grace`, but never more
        than its own timeout (a 1s job is not given 5s more) and at least 1s."""
        return min(self.timeout_grace, max(1.0, ex.job_type.timeout or 0.0))

    # -- shutdown ----------------------------------------------------------------------
    def _drain(self) -> None:
        deadline = time.monotonic() + self.grace
        while self.active() and time.monotonic() < deadline and not self._force.is_set():
            self._wake.wait(0.2)
            self._wake.clear()
        with self._lock:
            unfinished = list(self._executions.values())
        for ex in unfinished:
            if not self._abandon(ex, None):
                continue
            progress, checkpoint = ex.ctx.take_pending()
            try:
                with self.control_pool.connection(timeout=5) as conn:
                    handed = conn.execute(Q.hand_back_execution, {
                        "job_id": ex.ctx.job_id, "execution_id": ex.ctx.execution_id,
                        "progress": progress, "checkpoint": checkpoint}).fetchone()
                log.warning("job %s handed back to pending at shutdown%s", ex.ctx.job_id,
                            "" if handed else " (already taken over)",
                            extra={"action": "job_handed_back", "job_id": ex.ctx.job_id})
            except DB_ERRORS as exc:
                log.error("job %s: hand-back failed (%s); its lease will expire and recovery "
                          "will return it", ex.ctx.job_id, exc)
