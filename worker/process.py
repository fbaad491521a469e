"""The worker process: the duties of worker/ composed, started and stopped together.

Threads, each with one duty:
- producer (the main thread): claims batches of jobs ahead of free slots into a bounded
  buffer (worker/producer.py); sleeps until LISTEN/NOTIFY, a low buffer or the poll
  interval (the fallback that always works) wakes it.
- listener: holds a LISTEN connection and wakes the producer; reconnects with backoff.
- slots: `concurrency` reusable threads running handlers (worker/executor.py).
- completer: writes outcomes in batches, each row a compare-and-set (worker/completer.py).
- heartbeat: renews every lease this process holds in one statement, learns cancellations
  and lost leases, enforces timeouts, runs recovery (worker/heartbeat.py).
- duties: schedules and retention, each at its own interval (worker/duties.py).

SIGTERM/SIGINT: stop claiming, hand the jobs still waiting in the buffer back at once
(no attempt spent), let running jobs finish within `grace`, hand the rest back, flush the
completer, exit 0. A second signal forces the hand-back at once.
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

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from .completer import Completer
from .db import DedicatedConnection, connect_kwargs, database_url
from .duties import Duties
from .executor import Executor
from .heartbeat import Heartbeat
from .job_types import publish_job_types
from .listener import listen_for_jobs
from .logs import execution_event, ms_since
from .producer import ClaimedJob, JobBuffer, Producer
from .queries import Q, batch_params
from .registry import Registry
from .registry import registry as default_registry
from .states import WorkerState

log = logging.getLogger("jobwarden.worker")

DB_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)

#: Defaults that suit typical jobs as well as tiny ones (README "Running workers").
DEFAULT_CONCURRENCY = 10
DEFAULT_CLAIM_BATCH = 200
DEFAULT_BUFFER_SIZE = 400
DEFAULT_FLUSH_BATCH = 200
DEFAULT_FLUSH_INTERVAL = 0.002


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("jobwarden")
    except Exception:
        return "dev"


class WorkerProcess:
    def __init__(self, registry: Registry = default_registry, *, url: str | None = None,
                 queues: list[str] | None = None, concurrency: int = DEFAULT_CONCURRENCY,
                 grace: float = 30.0, poll_interval: float = 2.0,
                 heartbeat_interval: float | None = None,
                 recovery_interval: float | None = None, timeout_grace: float = 5.0,
                 max_abandoned: int | None = None, worker_id: str | None = None,
                 restart_on_abandon: bool = False, claim_batch: int = DEFAULT_CLAIM_BATCH,
                 buffer_size: int = DEFAULT_BUFFER_SIZE,
                 flush_batch: int = DEFAULT_FLUSH_BATCH,
                 flush_interval: float = DEFAULT_FLUSH_INTERVAL):
        self.registry = registry
        self.types = list(registry)
        if not self.types:
            raise ValueError("no job types registered: --app must import your handlers")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if claim_batch < 1 or flush_batch < 1:
            raise ValueError("claim and flush batches must hold at least 1 job")
        if buffer_size < 0 or flush_interval < 0:
            raise ValueError("buffer size and flush interval cannot be negative")
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
        self.claim_batch = claim_batch
        self.buffer_size = buffer_size
        self.flush_batch = flush_batch
        self.flush_interval = flush_interval
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.pool: ConnectionPool | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()  # stop claiming
        self._force = threading.Event()  # second signal: stop now
        self._give_up = threading.Event()  # the completer stops retrying a failed flush
        self._closing = threading.Event()  # background threads exit
        self.restart_requested = False
        self.buffer = JobBuffer(on_low=self._wake.set)
        self.completer = Completer(DedicatedConnection(self.url), batch_size=flush_batch,
                                   interval=flush_interval, give_up=self._give_up)
        self.duties = Duties(registry, worker_id=self.worker_id)  # schedules, retention

    # -- lifecycle ---------------------------------------------------------------------
    def request_stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM does)."""
        self._stop.set()
        self._wake.set()

    def _on_signal(self, signum, _frame) -> None:
        if self._stop.is_set():
            log.warning("second signal %s: stopping now", signum, extra={"action": "force_stop"})
            self._force.set()
            self._give_up.set()
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
            check=ConnectionPool.check_connection,
            kwargs={"connect_timeout": 5, **connect_kwargs()},
            name="jobwarden-worker")
        # Heartbeats, recovery and hand-backs get their own connections: a lease must
        # never expire because busy handlers took every connection of the pool.
        self.control_pool = ConnectionPool(
            self.url, min_size=1, max_size=3, timeout=5, open=False,
            check=ConnectionPool.check_connection,
            kwargs={"connect_timeout": 5, **connect_kwargs()},
            name="jobwarden-control")
        self.pool.open(wait=False)
        self.control_pool.open(wait=False)
        self.executor = Executor(
            registry=self.registry, pool=self.pool, buffer=self.buffer,
            completer=self.completer, concurrency=self.concurrency,
            on_slot_free=self._wake.set, on_too_many_abandoned=self._too_many_abandoned,
            max_abandoned=self.max_abandoned, timeout_grace=self.timeout_grace)
        self.heartbeat = Heartbeat(
            control_pool=self.control_pool, worker_id=self.worker_id, registry=self.registry,
            executor=self.executor, buffer=self.buffer, completer=self.completer,
            interval=self.heartbeat_interval, recovery_interval=self.recovery_interval,
            worker_stale_after=self.worker_stale_after, draining=self._stop.is_set,
            on_recovered=self._wake.set)
        producer = Producer(
            conn=DedicatedConnection(self.url), types=[t.name for t in self.types],
            leases=[t.lease for t in self.types], queues=self.queues,
            worker_id=self.worker_id, buffer=self.buffer, concurrency=self.concurrency,
            running=self.executor.active, job_seconds=lambda: self.executor.job_seconds,
            claim_batch=self.claim_batch, buffer_size=self.buffer_size,
            poll_interval=self.poll_interval, wake=self._wake, stop=self._stop)
        self._register()
        completer = threading.Thread(target=self.completer.run, name="completer", daemon=True)
        threads = [threading.Thread(target=listen_for_jobs, name="listener", daemon=True,
                                    args=(self.url, self._wake, self._closing)),
                   threading.Thread(target=self.heartbeat.run, name="heartbeat", daemon=True,
                                    args=(self._closing,)),
                   threading.Thread(target=self.duties.run, name="duties", daemon=True,
                                    args=(self.control_pool, self._closing))]
        completer.start()
        for t in threads:
            t.start()
        self.executor.start()
        log.info("worker %s started: types=%s queues=%s concurrency=%s", self.worker_id,
                 [t.name for t in self.types], self.queues or "all", self.concurrency,
                 extra={"action": "worker_started", "worker_id": self.worker_id})
        try:
            producer.run()
            self._drain()
        finally:
            self.completer.close()
            # A flush failing on a database outage may retry for 3 leases; at shutdown
            # it gets the grace period, then recovery will take its jobs over.
            completer.join(timeout=5 if self._force.is_set() else self.grace)
            self._give_up.set()
            completer.join(timeout=5)
            self.completer.flush()  # anything submitted after the thread's last batch
            self._closing.set()
            for t in threads:
                t.join(timeout=5)
            self._set_stopped()
            self.control_pool.close(timeout=5)
            self.pool.close(timeout=5)
        log.info("worker %s stopped", self.worker_id, extra={"action": "worker_stopped"})
        if self.restart_requested and self.restart_on_abandon:
            log.warning("restarting: %d abandoned handler thread(s) still running",
                        self.executor.abandoned_alive(), extra={"action": "worker_restart"})
            sys.stdout.flush()
            sys.stderr.flush()
            # The same command line again (`jobwarden worker ...` or `python -m worker.cli`).
            os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
        return 1 if self._force.is_set() else 0

    def _too_many_abandoned(self, piled_up: int) -> None:
        if self._stop.is_set():
            return
        log.error("%d abandoned handler threads are still running (limit %d): restarting "
                  "the worker cleanly", piled_up, self.max_abandoned,
                  extra={"action": "abandoned_threads_limit"})
        self.restart_requested = True
        self.request_stop()

    def active(self) -> int:
        """Executions running in slots now."""
        return self.executor.active()

    def recover_once(self) -> dict[str, int]:
        return self.heartbeat.recover_once()

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

    # -- shutdown ----------------------------------------------------------------------
    def _drain(self) -> None:
        """Hand back what never started, let running jobs finish within the grace
        period, then hand back the rest."""
        waiting = self.buffer.close()
        if waiting:
            self._hand_back([(job, None, None) for job in waiting])
        deadline = time.monotonic() + self.grace
        while self.executor.active() and time.monotonic() < deadline and not self._force.is_set():
            self._wake.wait(0.2)
            self._wake.clear()
        unfinished, ran_ms = [], {}
        for ex in self.executor.running():
            if self.executor.abandon(ex, None):
                progress, checkpoint = ex.ctx.take_pending()
                unfinished.append((ex.job, progress, checkpoint))
                ran_ms[ex.job.execution_id] = ms_since(ex.ctx.started)
        if unfinished:
            self._hand_back(unfinished, ran_ms)
        # Outcomes being handed over right now (too late to abandon) reach the completer
        # within moments; wait for them so the final flush includes them.
        settle = time.monotonic() + 5
        while self.executor.active() and time.monotonic() < settle:
            time.sleep(0.02)

    def _hand_back(self, items: list[tuple[ClaimedJob, str | None, str | None]],
                   ran_ms: dict | None = None) -> None:
        """Return jobs to pending now, without spending an attempt (one statement).
        `ran_ms`: how long each started one ran, by execution id (None: none started)."""
        rows = [{"job_id": job.id, "execution_id": str(job.execution_id),
                 "progress": None if progress is None else json.loads(progress),
                 "checkpoint": None if checkpoint is None else json.loads(checkpoint)}
                for job, progress, checkpoint in items]
        try:
            with self.control_pool.connection(timeout=5) as conn:
                handed = {r[0] for r in conn.execute(Q.hand_back_executions,
                                                     batch_params(rows)).fetchall()}
        except DB_ERRORS as exc:
            log.error("%d job(s): hand-back failed (%s); their leases will expire and "
                      "recovery will return them", len(items), exc)
            return
        if ran_ms is not None:
            for job, _p, _c in items:
                log.warning("job %s handed back to pending at shutdown%s", job.id,
                            "" if job.id in handed else " (already taken over)",
                            extra=execution_event(
                                "job_handed_back", job_id=job.id, job_type=job.type,
                                queue=job.queue, execution_id=job.execution_id,
                                attempt=job.attempt, duration_ms=ran_ms[job.execution_id]))
        else:
            log.info("%d claimed job(s) never started: handed back to pending", len(handed),
                     extra={"action": "jobs_handed_back", "count": len(handed)})

    @property
    def state(self) -> WorkerState:
        return WorkerState.DRAINING if self._stop.is_set() else WorkerState.RUNNING
