"""The worker process: the duties of worker/ composed, started and stopped together.

Its queues are served in lanes (worker/engine/lanes.py): a lane is a set of queues with slots,
a buffer and a producer of its own, so a flood in one lane never takes another's slots.
Without `queues` there is one lane: every queue, `concurrency` slots.

Threads, each with one duty:
- producers, one per lane: claim batches of the lane's jobs ahead of its free slots into
  its bounded buffer (worker/engine/producer.py), each on a connection of its own, which
  LISTENs too; sleep until a notification for one of the lane's queues, a low buffer, a
  freed slot or the poll interval (the fallback that always works) wakes them, and claim
  on the thread and connection that woke.
- listener, only behind a transaction pooler with JOBWARDEN_LISTEN_URL (where the claim
  connections cannot LISTEN): holds a LISTEN connection past the pooler and wakes the
  producers of the notified queue's lanes; reconnects with backoff
  (worker/engine/listener.py).
- slots: each lane's reusable threads running handlers from its buffer (worker/engine/executor.py).
- loops: one event loop per lane that has run an `async def` handler, its coroutine
  handlers' tasks on it (worker/engine/loops.py).
- completer: writes outcomes in batches, each row a compare-and-set (worker/engine/completer.py).
- heartbeat: renews every lease this process holds, in every lane, in one statement; learns
  cancellations and lost leases, enforces timeouts, runs recovery (worker/engine/heartbeat.py).
- watchdog: every 0.1 s, enforces timeouts and logs a lane loop's stall, without waiting
  for a heartbeat (worker/engine/watchdog.py).
- duties: schedules and retention, each at its own interval (worker/duties/periodic.py).

A thread of the worker's own that dies of an exception (a handler's never reaches it:
worker/engine/runner.py) stops the worker, which then exits 1 so that its supervisor
starts it again: a worker a thread short would run on with a lane that no longer claims
or leases that are no longer renewed.

SIGTERM/SIGINT: stop claiming, hand the jobs still waiting in the buffers back at once
(no attempt spent), let running jobs finish within `grace`, hand the rest back, flush the
completer, exit 0. A second signal forces the hand-back at once. The main thread runs
no duty: it waits for the producers in short slices, so that it runs a signal's handler
within moments whichever thread the signal reached (SIGNAL_CHECK_SECONDS).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib.metadata import version
from types import FrameType
from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from jobwarden.worker.core.dberrors import DB_UNREACHABLE, Backoff
from jobwarden.worker.core.logs import execution_event, ms_since
from jobwarden.worker.core.states import WorkerState
from jobwarden.worker.duties import recovery
from jobwarden.worker.duties.delivery import register_notify_job
from jobwarden.worker.duties.periodic import Duties
from jobwarden.worker.engine import attempt_log, heap, stop_signals
from jobwarden.worker.engine.completer import Completer, hand_back
from jobwarden.worker.engine.config import WorkerConfig
from jobwarden.worker.engine.executor import Executor
from jobwarden.worker.engine.heartbeat import Heartbeat
from jobwarden.worker.engine.lanes import EVERY_OTHER, Lane, parse_queues
from jobwarden.worker.engine.limits import LimitBook
from jobwarden.worker.engine.listener import (
    LISTEN_APPLICATION_NAME,
    Wakeup,
    listen_for_jobs,
    producers_listen,
)
from jobwarden.worker.engine.producer import (
    ClaimedJob,
    ClaimSpec,
    JobBuffer,
    Producer,
    ProducerSettings,
    fair_weights,
)
from jobwarden.worker.engine.watchdog import Watchdog
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.jobs.registry import Registry
from jobwarden.worker.jobs.registry import registry as default_registry
from jobwarden.worker.ops.reconcile import register_reconcile_job
from jobwarden.worker.store.db import (
    DedicatedConnection,
    SchemaOutOfDate,
    check_schema,
    code_heads,
    connect_kwargs,
    database_url,
)
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.worker")

#: The longest the main thread waits at a time while the worker runs. The kernel gives a
#: signal sent to the process to any one of its threads, and Python runs the handler on
#: the main thread only, the next time that thread runs: a main thread waiting with no
#: timeout never ran it, and the worker ignored a SIGTERM that another thread had taken
#: (docs/faults.md, "A signal taken by another thread").
SIGNAL_CHECK_SECONDS = 0.1


def _join(thread: threading.Thread, timeout: float | None = None) -> None:
    """thread.join(timeout), in slices of SIGNAL_CHECK_SECONDS: on the main thread a
    signal's handler runs between them."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        left = SIGNAL_CHECK_SECONDS if deadline is None else deadline - time.monotonic()
        if left <= 0:
            return
        thread.join(min(left, SIGNAL_CHECK_SECONDS))


def _version() -> str:
    try:
        return version("jobwarden")
    except Exception:
        return "dev"


@dataclass(eq=False)
class LaneRuntime:
    """One lane at work: its buffer, its slot threads and its producer."""

    lane: Lane
    wake: Wakeup  # its producer's: a notification, a low buffer, a freed slot
    buffer: JobBuffer
    executor: Executor
    producer: Producer


class WorkerProcess:
    """One worker: `WorkerProcess(registry, WorkerConfig(...))`, or with the config's
    fields as keywords (`WorkerProcess(registry, queues=..., concurrency=8)`), which build
    the config; a ValueError says which setting is wrong."""

    def __init__(self, registry: Registry = default_registry,
                 config: WorkerConfig | None = None, **settings: Any) -> None:
        if config is None:
            config = WorkerConfig(**settings)  # an unknown keyword: TypeError naming it
        elif settings:
            raise TypeError("WorkerProcess takes either a WorkerConfig or keyword settings, "
                            f"not both (got {', '.join(sorted(settings))})")
        self.config = config
        if not list(registry):
            raise ValueError("no job types registered: --app must import your handlers")
        # The built-in types go into a copy: the caller's registry (the app's, which its
        # web process and tests share) stays what the app registered.
        registry = registry.clone()
        self.registry = registry
        register_reconcile_job(registry)  # only when one of its types has a reconciler
        register_notify_job(registry)  # sends the notifier's messages (delivery.py)
        self.types = list(registry)
        # ValueError says what is wrong with the queues (worker/engine/lanes.py).
        self.lanes = parse_queues(config.queues, config.concurrency)
        self.url = config.url or database_url()
        #: LISTEN on each producer's claim connection; else a listener thread (or none).
        self.producers_listen = producers_listen(self.url)
        #: The queue names it serves ("*": every queue no capacity lane names).
        self.queues = [q for lane in self.lanes for q in (lane.queues or [EVERY_OTHER])]
        #: Slots in all lanes.
        self.concurrency = sum(lane.slots for lane in self.lanes)
        min_lease = min(t.lease for t in self.types)
        self.heartbeat_interval = (config.heartbeat_interval
                                   or min(10.0, max(0.2, min_lease / 3)))
        self.recovery_interval = config.recovery_interval or min(30.0, max(0.5, min_lease / 2))
        # Another worker counts as gone after missing several of its heartbeats.
        self.worker_stale_after = max(5.0, 5 * self.heartbeat_interval)
        self.max_abandoned = (self.concurrency if config.max_abandoned is None
                              else config.max_abandoned)
        self.worker_id = (config.worker_id
                          or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}")
        self._stop = threading.Event()  # stop claiming
        self._force = threading.Event()  # second signal: stop now
        self._give_up = threading.Event()  # the completer stops retrying a failed flush
        self._closing = threading.Event()  # background threads exit
        self.restart_requested = False
        self._failed = False  # a thread of its own died: exit 1
        # Made here, opened by run(): every part of the worker exists from the start.
        # Handlers may hold two connections each (ctx.transaction() plus progress or the
        # effect ledger), and abandoned threads keep theirs until they return.
        self.pool: ConnectionPool = ConnectionPool(
            self.url, min_size=1, max_size=2 * self.concurrency + 2, timeout=10, open=False,
            check=ConnectionPool.check_connection,
            kwargs={"connect_timeout": 5, **connect_kwargs()},
            name="jobwarden-worker")
        # Hand-backs, registration and the duties get their own connections (the
        # heartbeat has one of its own): a lease must never expire because busy handlers
        # took every connection of the pool.
        self.control_pool: ConnectionPool = ConnectionPool(
            self.url, min_size=1, max_size=3, timeout=5, open=False,
            check=ConnectionPool.check_connection,
            kwargs={"connect_timeout": 5, **connect_kwargs()},
            name="jobwarden-control")
        #: The connections of the worker's hot duties, one each: opened together while
        #: the worker registers (run(), `open_ahead`).
        self._dedicated: list[DedicatedConnection] = []
        self.completer = Completer([self._dedicated_connection()
                                    for _ in range(config.flush_writers)],
                                   batch_size=config.flush_batch,
                                   interval=config.flush_interval, give_up=self._give_up,
                                   on_keys_freed=self._keys_freed)
        #: Rate limits and caps, declared and live (re-read by the duties).
        self.limits = LimitBook(self.types)
        self._lanes = [self._lane_runtime(lane) for lane in self.lanes]
        # schedules, retention, policies, live limits; the notifier where its jobs are served
        self.duties = Duties(registry, worker_id=self.worker_id, limits=self.limits,
                             serves=lambda queue: any(lane.serves(queue)
                                                      for lane in self.lanes))
        self.heartbeat = Heartbeat(
            conn=self._dedicated_connection(), worker_id=self.worker_id,
            executors=[rt.executor for rt in self._lanes], completer=self.completer,
            interval=self.heartbeat_interval, recovery_interval=self.recovery_interval,
            recover=partial(recovery.recover_pass, registry=self.registry,
                            stale_after=self.worker_stale_after),
            draining=self._stop.is_set, on_recovered=self._wake, on_renewing=self._wake)
        for rt in self._lanes:  # claims wait while its beats fail (Producer._renewable)
            rt.producer.renewal = self.heartbeat
        self.watchdog = Watchdog([rt.executor for rt in self._lanes])

    def _dedicated_connection(self, **options: Any) -> DedicatedConnection:
        conn = DedicatedConnection(self.url, **options)
        self._dedicated.append(conn)
        return conn

    # -- lifecycle ---------------------------------------------------------------------
    def _keys_freed(self) -> None:
        """Written outcomes ended executions that held concurrency keys: every lane's
        producer claims again (those keys' next jobs may start now)."""
        for rt in self._lanes:
            rt.producer.wake.set()

    def request_stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM does)."""
        self._stop.set()
        self._wake()

    def _wake(self, queue: str | None = None) -> None:
        """Wake the producers of the lanes serving `queue` (a notification names it), or
        of every lane (recovered jobs, a stop)."""
        for rt in self._lanes:
            if queue is None or rt.lane.serves(queue):
                rt.wake.set()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._stop.is_set():
            log.warning("second signal %s: stopping now", signum, extra={"action": "force_stop"})
            self._force.set()
            self._give_up.set()
        else:
            log.info("signal %s: draining (grace %ss)", signum, self.config.grace,
                     extra={"action": "drain_started"})
            self.request_stop()
        self._wake()

    def run(self) -> int:
        """Run until stopped; returns the process exit code."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
            if stop_signals.take():  # asked while the command loaded (stop_signals.py)
                self.request_stop()
        if self.config.settle_heap:
            # What the start made is kept to the end: left out of every collection from
            # now on (worker/engine/heap.py). Here, not once registered: a registration
            # retried while the database is down must not wait with the collector held.
            heap.settle()
        # Each attempt's log lines (attempt_log.py): one handler on the root logger, after
        # the command's own logging setup (logging.basicConfig adds nothing to a root
        # logger that has a handler already).
        attempt_log.install()
        self.pool.open(wait=False)
        self.control_pool.open(wait=False)
        # Connected while the worker registers: its first beat, claim and finish then
        # find their connections made (DedicatedConnection.open_ahead). Nothing is sent
        # on them before registration has checked the schema.
        for conn in self._dedicated:
            conn.open_ahead()
        try:
            registered = self._register()
        except SchemaOutOfDate:  # nothing was written: the caller says why, in one line
            self._close_unstarted()
            raise
        if not registered:
            # Stopped before it registered (while it loaded, or while still retrying):
            # nothing was claimed or started, so saying "started" (and then "stopped")
            # would tell of a worker that never ran.
            self._close_unstarted()
            log.info("worker %s stopped before it started: it never registered",
                     self.worker_id, extra={"action": "worker_stopped_before_start"})
            return 0
        completers = [self._thread(f"completer-{i}", self.completer.run, i)
                      for i in range(self.completer.writers)]
        # The heartbeat first: the producers' first claim waits for its first beat
        # (Producer._renewable).
        threads = [self._thread("heartbeat", self.heartbeat.run, self._closing),
                   self._thread("watchdog", self.watchdog.run, self._closing),
                   self._thread("duties", self.duties.run, self.control_pool, self._closing)]
        if not self.producers_listen:
            threads.append(self._thread("listener", listen_for_jobs, self.url, self._wake,
                                        self._closing))
        # Every lane's producer claims on a thread of its own: this one only waits.
        producers = [threading.Thread(target=self._produce, args=(rt,), daemon=True,
                                      name=f"producer-{rt.lane.label}")
                     for rt in self._lanes]
        for t in threads:
            t.start()
        for t in completers:
            t.start()
        for rt in self._lanes:
            rt.executor.start()
        for t in producers:
            t.start()
        log.info("worker %s started: types=%s lanes=%s", self.worker_id,
                 [t.name for t in self.types],
                 "; ".join(f"{rt.lane.label}: {rt.lane.slots} slots" for rt in self._lanes),
                 extra={"action": "worker_started", "worker_id": self.worker_id})
        try:
            for t in producers:
                _join(t)  # a claim under way lands in its buffer before the drain empties it
            self._drain()
        finally:
            self._stop.set()  # every lane's producer, however the claiming ended
            self.completer.close()
            # A flush failing on a database outage may retry for 3 leases; at shutdown
            # it gets the grace period, then recovery will take its jobs over.
            grace = 5 if self._force.is_set() else self.config.grace
            deadline = time.monotonic() + grace
            for t in completers:
                _join(t, deadline - time.monotonic())  # a second signal cuts it short
            self._give_up.set()
            for t in completers:
                _join(t, 5)
            self.completer.flush()  # anything submitted after the thread's last batch
            self._closing.set()
            for t in threads:
                _join(t, 5)
            self._set_stopped()
            for rt in self._lanes:
                rt.executor.stop_loop()
            self.control_pool.close(timeout=5)
            self.pool.close(timeout=5)
        log.info("worker %s stopped", self.worker_id, extra={"action": "worker_stopped"})
        if self.restart_requested and self.config.restart_on_abandon:
            log.warning("restarting: %d abandoned handler thread(s) still running",
                        self._abandoned_alive(), extra={"action": "worker_restart"})
            sys.stdout.flush()
            sys.stderr.flush()
            # The same command line again (`jobwarden worker ...` or
            # `python -m jobwarden.worker.cli`).
            os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
        return 1 if self._force.is_set() or self._failed else 0

    def _thread(self, name: str, target: Callable[..., object], *args: Any) -> threading.Thread:
        """A daemon thread running `target(*args)`; its death stops the worker (exit 1)."""
        def run() -> None:
            try:
                target(*args)
            except BaseException as exc:
                self._thread_died(name, exc)

        return threading.Thread(target=run, name=name, daemon=True)

    def _thread_died(self, name: str, exc: BaseException) -> None:
        """A thread of the worker's own died: stop, and exit 1 (a SystemExit too, which
        Python's threads would drop without a word, the worker later exiting 0)."""
        self._failed = True
        self.request_stop()
        log.critical("thread %s died (%s): stopping the worker, which will exit 1", name,
                     type(exc).__name__, exc_info=exc,
                     extra={"action": "thread_died", "thread_name": name})

    def _produce(self, rt: LaneRuntime) -> None:
        """A lane's producer on a thread of its own (it runs jobs too). If it fails (not a
        database outage, which it rides out), the worker stops rather than run with a
        lane that no longer claims, and exits 1 so that its supervisor starts it again."""
        try:
            rt.producer.run()
        except BaseException as exc:
            log.error("lane %s: the producer failed; stopping the worker", rt.lane.label,
                      extra={"action": "producer_failed"})
            self._thread_died(f"producer-{rt.lane.label}", exc)

    def _lane_runtime(self, lane: Lane) -> LaneRuntime:
        """A lane with its buffer, its slot threads (started by run()) and its producer,
        which claims only the lane's queues on a connection of its own."""
        wake = Wakeup()
        buffer = JobBuffer(on_low=wake.set)

        def slot_freed(job: ClaimedJob | None) -> None:
            producer.slot_freed(job)  # made below, before any slot runs

        executor = Executor(
            registry=self.registry, pool=self.pool, buffer=buffer,
            completer=self.completer, concurrency=lane.slots, on_slot_free=slot_freed,
            on_abandoned=self._check_abandoned, timeout_grace=self.config.timeout_grace,
            threads=self._slot_threads(lane), name=lane.label,
            on_loop_stuck=self._loop_stuck, on_thread_died=self._thread_died)
        claims = ClaimSpec(
            types=[t.name for t in self.types], leases=[t.lease for t in self.types],
            limits=[t.concurrency_limit for t in self.types],
            type_queues=[t.queue for t in self.types],
            type_max_attempts=[t.max_attempts for t in self.types],
            queues=list(lane.queues) if lane.queues is not None else None,
            skip_queues=list(lane.excluded) or None, worker_id=self.worker_id,
            fair_types=[t.name for t in self.types if t.fair_key is not None] or None,
            fair_weights=fair_weights(self.types))
        settings = ProducerSettings(claim_batch=self.config.claim_batch,
                                    buffer_size=self.config.buffer_size,
                                    poll_interval=self.config.poll_interval)
        listens = self.producers_listen
        producer = Producer(
            conn=self._dedicated_connection(**(
                {"application_name": LISTEN_APPLICATION_NAME} if listens else {})),
            claims=claims, settings=settings,
            buffer=buffer, concurrency=lane.slots, running=executor.active,
            job_seconds=lambda: executor.job_seconds, wake=wake, stop=self._stop,
            limits=partial(self.limits.for_lane, lane.serves),
            listens=listens, serves=lane.serves,
            # A claimed thread handler's first job may start on the thread that claimed
            # it (worker/engine/producer.py, "Running the first job").
            runner=executor if any(not t.is_coroutine for t in self.types) else None,
            name=lane.label)
        return LaneRuntime(lane, wake, buffer, executor, producer)

    def _read_limits(self, conn: psycopg.Connection) -> None:
        """The live limits before the first claim (after it, the duties re-read them), on
        the registration's connection, in a transaction of their own."""
        try:
            with conn.transaction():
                self.limits.refresh(conn)
        except psycopg.Error as exc:
            log.warning("live limits not read yet (%s): the duties will read them", exc,
                        extra={"action": "limits_unread"})

    def _close_unstarted(self) -> None:
        """Close what run() opened, for a worker that never started."""
        for conn in self._dedicated:
            conn.drop()
        self.control_pool.close(timeout=5)
        self.pool.close(timeout=5)

    def _slot_threads(self, lane: Lane) -> int:
        """Slot threads for a lane: one per slot, but one alone when every type whose
        queue the lane serves is a coroutine handler (it only feeds the lane's loop; a
        thread handler's job sent there under another queue still runs, on that one)."""
        served = [t for t in self.types if lane.serves(t.queue)]
        if served and all(t.is_coroutine for t in served):
            return 1
        return lane.slots

    def _abandoned_alive(self) -> int:
        return sum(rt.executor.abandoned_alive() for rt in self._lanes)

    def _check_abandoned(self) -> None:
        """After an abandonment: too many abandoned threads alive, in all lanes together,
        make the worker restart."""
        piled_up = self._abandoned_alive()
        if piled_up > self.max_abandoned:
            self._too_many_abandoned(piled_up)

    def _loop_stuck(self, why: str) -> None:
        """A lane's loop is held by a handler that ignored its timeout (a blocking call
        in a coroutine): no coroutine of that lane can run again in this process."""
        if self._stop.is_set():
            return
        log.error("%s: restarting the worker cleanly", why,
                  extra={"action": "loop_stuck_restart"})
        self.restart_requested = True
        self.request_stop()

    def _too_many_abandoned(self, piled_up: int) -> None:
        if self._stop.is_set():
            return
        log.error("%d abandoned handler threads are still running (limit %d): restarting "
                  "the worker cleanly", piled_up, self.max_abandoned,
                  extra={"action": "abandoned_threads_limit"})
        self.restart_requested = True
        self.request_stop()

    def active(self) -> int:
        """Executions running in slots now, in every lane."""
        return sum(rt.executor.active() for rt in self._lanes)

    def recover_once(self) -> dict[str, int]:
        return self.heartbeat.recover_once()

    def _register(self) -> bool:
        """Register, retrying while the database is unreachable; False if stopped first."""
        # The migrations this code knows, read from their files (check_schema) while the
        # control pool's first connection is made, not after it.
        code_heads()
        backoff = Backoff()
        while not self._stop.is_set():
            try:
                with self.control_pool.connection() as conn:
                    # Before the first write: an old schema would take it, or fail on a
                    # column it lacks. SchemaOutOfDate, when behind, stops the worker.
                    newer = check_schema(conn)
                    if newer:
                        log.warning("%s", newer, extra={"action": "schema_newer"})
                    JobStore(conn).rows(Q.register_worker, {
                        "worker_id": self.worker_id, "host": socket.gethostname(),
                        "pid": os.getpid(), "queues": self.queues,
                        "lanes": Jsonb([lane.as_row() for lane in self.lanes]),
                        "job_types": [t.name for t in self.types],
                        "concurrency": self.concurrency, "version": _version()})
                    publish_job_types(conn, self.types, published_by=self.worker_id)
                    conn.commit()  # registered, whatever the read of the limits meets
                    self._read_limits(conn)
                return True
            except DB_UNREACHABLE as exc:
                wait = backoff.next()
                log.warning("cannot register worker (%s); retrying in %.1fs", exc, wait)
                self._stop.wait(wait)
        return False

    def _set_stopped(self) -> None:
        try:
            with self.control_pool.connection(timeout=3) as conn:
                JobStore(conn).rows(Q.worker_stopped, {"worker_id": self.worker_id})
        except DB_UNREACHABLE as exc:
            log.warning("could not mark worker stopped: %s", exc)

    # -- shutdown ----------------------------------------------------------------------
    def _drain(self) -> None:
        """Hand back what never started, let running jobs finish within the grace
        period, then hand back the rest."""
        waiting = [job for rt in self._lanes for job in rt.buffer.close()]
        if waiting:
            self._hand_back([(job, None, None) for job in waiting])
        deadline = time.monotonic() + self.config.grace
        while self.active() and time.monotonic() < deadline:
            if self._force.wait(0.05):
                break
        unfinished: list[tuple[ClaimedJob, str | None, str | None]] = []
        ran_ms: dict[UUID, float] = {}
        for rt in self._lanes:
            for ex in rt.executor.running():
                if rt.executor.abandon(ex, None):
                    progress, checkpoint = ex.control.take_pending()
                    unfinished.append((ex.job, progress, checkpoint))
                    ran_ms[ex.job.execution_id] = ms_since(ex.control.started)
        if unfinished:
            self._hand_back(unfinished, ran_ms)
        # Outcomes being handed over right now (too late to abandon) reach the completer
        # within moments; wait for them so the final flush includes them.
        settle = time.monotonic() + 5
        while self.active() and time.monotonic() < settle:
            time.sleep(0.02)

    def _hand_back(self, items: list[tuple[ClaimedJob, str | None, str | None]],
                   ran_ms: dict[UUID, float] | None = None) -> None:
        """Return jobs to pending now, without spending an attempt (one statement).
        `ran_ms`: how long each started one ran, by execution id (None: none started)."""
        try:
            with self.control_pool.connection(timeout=5) as conn:
                handed = hand_back(conn, items)
        except DB_UNREACHABLE as exc:
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
