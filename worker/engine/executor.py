"""The executor: a fixed set of slot threads that run handlers from the buffer.

Each slot thread takes the next claimed job from the producer's buffer, runs its
handler, hands the outcome to the completer and takes the next job: threads are reused,
not started per job. A handler that ignores its timeout is abandoned: its slot is given
to a new thread at once, and the old one ends whenever the handler returns (its result
is discarded). Too many abandoned threads still alive make the worker restart itself.
A worker has one executor per lane (worker/engine/lanes.py), each reading only its lane's buffer.

`async def` handlers run on the lane's event loop (worker/engine/loops.py) instead: the
slot thread that takes such a job starts its task there and goes back for the next job.
A lane's slots are a count of executions in flight, thread or task (`_free`), so a lane
of coroutine handlers needs one slot thread to feed its loop, not one per slot. A task is
cancelled where a thread is asked to stop (timeout, operator cancel, lost lease,
shutdown), and abandoned as a thread is when it does not end in time.

A claimed job starts only while its lease is known to be held: by the worker's own clock
(worker/core/lease.py), or else by asking the database first (docs/faults.md, "Starting
buffered work"). A process woken from a freeze never starts work it no longer owns.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, Literal

from psycopg_pool import ConnectionPool

from jobwarden.worker.core import lease
from jobwarden.worker.core.dberrors import DB_UNREACHABLE
from jobwarden.worker.core.errors import CANCELLED
from jobwarden.worker.core.logs import running_event, waiting_event
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.engine import runner
from jobwarden.worker.engine.completer import Completer, Completion
from jobwarden.worker.engine.context import ExecutionControl
from jobwarden.worker.engine.loops import STALL_SECONDS, LaneLoop
from jobwarden.worker.engine.producer import ClaimedJob, JobBuffer, Slots
from jobwarden.worker.jobs.registry import JobType, Registry
from jobwarden.worker.store.event_totals import ZOMBIE_LEASE, count_on
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.executor")

#: How long a slot waits before asking again when the database cannot confirm a lease.
CONFIRM_RETRY_SECONDS = 0.5
#: How long a slot waits before offering a coroutine job to a stalled loop again.
STALL_RETRY_SECONDS = 0.1
#: Most coroutine jobs a slot thread hands its lane's loop at once.
DISPATCH_BATCH = 64


@dataclass(eq=False, slots=True)
class Execution:
    """One claimed job being run by a slot thread, or as a task on its lane's loop.
    Slots: one is made per job, and an instance dict of its own cost 0.5 us of it."""

    job: ClaimedJob
    job_type: JobType
    control: ExecutionControl  # the worker's side; the handler gets control.ctx
    thread: threading.Thread
    lock: threading.Lock = field(default_factory=threading.Lock)
    abandoned: bool = False  # the worker gave up on it (timeout, shutdown): ignore its result
    recording: bool = False  # its outcome is being handed over: too late to abandon
    timeout_noticed: float | None = None
    #: A coroutine handler: it runs as `task` on its lane's loop, not on `thread`.
    coroutine: bool = False
    task: asyncio.Task[None] | None = None  # set on the loop (None: not started there yet)
    holds_slot: bool = True  # it counts against the lane's slots until _free()

    def alive(self) -> bool:
        if self.coroutine:
            return self.task is None or not self.task.done()
        return self.thread.is_alive()


def _any_job(job: ClaimedJob) -> bool:
    return True


class Undecided(Enum):
    """The type of UNDECIDED: an enum of one member, so that `ex is UNDECIDED` tells a
    type checker which of begin()'s answers is left."""

    UNDECIDED = "undecided"


#: What begin() returns when the database could not confirm a job's lease.
UNDECIDED: Final = Undecided.UNDECIDED


class Executor:
    """Runs claimed jobs on `concurrency` reusable slot threads."""

    def __init__(self, *, registry: Registry, pool: ConnectionPool, buffer: JobBuffer,
                 completer: Completer, concurrency: int,
                 on_slot_free: Callable[[ClaimedJob | None], None],
                 on_abandoned: Callable[[], None], timeout_grace: float = 5.0,
                 threads: int | None = None, name: str = "*",
                 on_loop_stuck: Callable[[str], None] | None = None,
                 on_thread_died: Callable[[str, BaseException], None] | None = None) -> None:
        self.registry = registry
        self.pool = pool
        self.buffer = buffer
        self.completer = completer
        self.concurrency = concurrency
        #: Slot threads: `concurrency` unless told fewer (a lane whose types are all
        #: coroutines needs one to feed its loop).
        self.threads = concurrency if threads is None else max(1, min(threads, concurrency))
        self.name = name
        # Told when the lane's loop is held by a handler already abandoned: nothing more
        # can run on it, so the worker restarts (as for too many abandoned threads).
        self._on_loop_stuck = on_loop_stuck
        # Told when a slot thread dies of an exception (a handler's never gets this far):
        # the worker stops and exits non-zero rather than run on a slot short.
        self._on_thread_died = on_thread_died
        # The heartbeat and the watchdog both enforce timeouts: one at a time.
        self._timeouts_lock = threading.Lock()
        # The lane's slots, thread or task: taken before a job is, given back by _free().
        self._slots_free = Slots(concurrency)
        self._loop: LaneLoop | None = None
        # Told of a slot freed with no claimed job waiting for it, and of the job that held
        # it (None: unknown): the producer claims if that can have made work claimable
        # (Producer.slot_freed).
        self._on_slot_free = on_slot_free
        # Told of each abandoned thread: the worker counts them over all its lanes.
        self._on_abandoned = on_abandoned
        self.timeout_grace = timeout_grace
        # The executions running, in the order they began. Keyed by the Execution itself
        # (eq=False: hashed by identity, in C), not its execution id: a UUID's hash is a
        # Python call, and this dict is written and read three times a job.
        self._running: dict[Execution, None] = {}
        self._abandoned: list[Execution] = []
        self._lock = threading.Lock()
        self._slots = 0
        #: Recent handler duration in seconds (moving average), None until one ran.
        self.job_seconds: float | None = None

    # -- slots ---------------------------------------------------------------------------
    def start(self) -> None:
        for _ in range(self.threads):
            self._start_slot()

    def loop(self) -> LaneLoop:
        """The lane's event loop, started on its first coroutine job."""
        with self._lock:
            if self._loop is None:
                # Its async connections are for ctx.transaction(): as many as the slots,
                # within the worker pool's own bound.
                self._loop = LaneLoop(self.name, sync_pool=self.pool, max_connections=min(
                    self.concurrency, self.pool.max_size))
                self._loop.start()
            return self._loop

    @property
    def lane_loop(self) -> LaneLoop | None:
        return self._loop

    def stop_loop(self) -> None:
        if self._loop is not None:
            self._loop.stop()

    def _start_slot(self) -> None:
        with self._lock:
            self._slots += 1
            n = self._slots
        threading.Thread(target=self._slot, name=f"slot-{n}", daemon=True).start()

    def _slot(self) -> None:
        try:
            self._serve_slot()
        except BaseException as exc:
            if self._on_thread_died is None:
                raise
            self._on_thread_died(threading.current_thread().name, exc)

    def _serve_slot(self) -> None:
        while True:
            # A job and a slot for it together: an idle slot thread holds no slot, so the
            # producer can take one for the job it just claimed (take_slot_for).
            job = self.buffer.take_with_slot(self._slots_free, timeout=1.0)
            if job is False:
                # Every slot is in use (tasks on the loop, a job its producer runs): wait
                # for one, then take a job if one is still there.
                if not self._slots_free.acquire(timeout=1.0):
                    continue
                job = self.buffer.take_next_if(_any_job)
                if job is None:
                    self._slots_free.release()
                    continue
            elif job is None:
                if self.buffer.closed:
                    return
                continue
            ex = self.begin_in_slot(job)
            if ex is not None and not self.run_begun(ex):
                return  # abandoned: a fresh thread already took this slot over

    def take_slot_for(self, job: ClaimedJob) -> bool:
        """Take a free slot, without waiting, for a thread-handler job that the calling
        thread will begin and run itself: the producer's, which claimed it
        (worker/engine/producer.py, "Running the first job"). False: no slot is free, or
        the job is a coroutine's (those go to the loop from the buffer)."""
        job_type = self.registry.get(job.type)
        if job_type is None or job_type.is_coroutine:
            return False
        return self._slots_free.acquire(blocking=False)

    def begin_in_slot(self, job: ClaimedJob) -> Execution | None:
        """Begin `job` on this thread, which holds a slot for it: the running execution
        for this thread to run (run_begun), or None when there is none (the job must not
        run, or waits to be asked about again, or went to the loop as a task); the slot
        is then given back or passed on."""
        if self._loop_stalled(job) and self.buffer.put_back(job):
            # A blocking call holds the lane's loop: a task started now would only
            # wait behind it. The job stays claimed (the heartbeat renews it).
            self._slots_free.release()
            time.sleep(STALL_RETRY_SECONDS)
            return None
        ex = self.begin(job)
        if ex is UNDECIDED:
            # The database could not say whether the job is still ours: keep it (the
            # heartbeat keeps renewing it) and ask again shortly.
            self._slots_free.release()
            if self.buffer.put_back(job):
                time.sleep(CONFIRM_RETRY_SECONDS)
            return None
        if ex is None:
            self._slots_free.release()
            if not len(self.buffer):
                self._on_slot_free(job)
            return None
        if ex.coroutine:
            # Its slot is given back when its task ends. The jobs right behind it
            # go to the loop with it: one wake-up of the loop for the lot.
            self._start_tasks(self._more_coroutines([ex]))
            return None
        return ex

    def run_begun(self, ex: Execution) -> bool:
        """Run a thread handler that begin_in_slot began on this thread. False: it was
        abandoned meanwhile (a timeout, the shutdown), a fresh thread has taken its slot
        over, and this thread is to end."""
        self._run(ex)
        if ex.abandoned:
            return False
        if not len(self.buffer):
            self._on_slot_free(ex.job)
        return True

    def _loop_type(self, job: ClaimedJob) -> JobType | None:
        """The job's type when the job is a coroutine's and its loop can take it now."""
        job_type = self.registry.get(job.type)
        if job_type is None or not job_type.is_coroutine or self._stalled():
            return None
        return job_type

    def _runs_on_loop(self, job: ClaimedJob) -> bool:
        """A coroutine job whose loop can take it now."""
        return self._loop_type(job) is not None

    def _loop_stalled(self, job: ClaimedJob) -> bool:
        job_type = self.registry.get(job.type)
        return job_type is not None and job_type.is_coroutine and self._stalled()

    def _stalled(self) -> bool:
        """Whether the lane's loop is held (a blocking call in a coroutine handler)."""
        return self._loop is not None and self._loop.stalled_for() >= STALL_SECONDS

    def _free(self, ex: Execution) -> bool:
        """Give the execution's slot back (once: its end and its abandonment both try;
        True for the one that did)."""
        held = self._take_slot_back(ex)
        if held:
            self._slots_free.release()
        return held

    @staticmethod
    def _take_slot_back(ex: Execution) -> bool:
        """Whether the execution still held its slot, which it no longer does: the caller
        gives it back or passes it on."""
        with ex.lock:
            held, ex.holds_slot = ex.holds_slot, False
        return held

    def running(self) -> list[Execution]:
        with self._lock:
            return list(self._running)

    def active(self) -> int:
        return len(self._running)

    # -- one job -------------------------------------------------------------------------
    def begin(self, job: ClaimedJob) -> Execution | Literal[Undecided.UNDECIDED] | None:
        """Turn a claimed job into a running execution (None: it must not run;
        UNDECIDED: the database could not confirm its lease, try again later)."""
        job_type = self.registry.get(job.type)
        assert job_type is not None, "claim_jobs only returns the types this worker handles"
        # The moment of the decision, read before the lease check that makes it: a process
        # frozen between the check and the handler's start decided before the freeze, and
        # its execution's `started` says so (docs/faults.md, "Starting buffered work").
        decided = time.monotonic()
        if not job.lost and not lease.vouched(job.granted_at, job_type.lease):
            held = self._confirm_lease(job, job_type)
            if held is None:
                return UNDECIDED
            if not held:
                job.lost = True
                count_on(self.pool, ZOMBIE_LEASE, [job.type])
            decided = time.monotonic()  # the database's answer decided it
        if job.lost:
            log.warning("job %s: lease lost while waiting in the buffer; not started",
                        job.id, extra=waiting_event("lease_lost", job))
            return None
        if job.cancel_requested:
            # Cancelled while it waited: end it without running it.
            self.completer.submit(Completion(
                job_id=job.id, execution_id=job.execution_id, type=job.type,
                attempt=job.attempt, lease=job_type.lease, status=JobStatus.CANCELLED,
                outcome=ExecutionOutcome.CANCELLED, error_code=CANCELLED,
                error="cancelled at operator request", queue=job.queue,
                batch_id=job.batch_id))
            return None
        control = ExecutionControl.for_job(
            job, pool=self.pool, timeout=job_type.timeout, started=decided,
            async_pool=self.loop().connection_pool if job_type.is_coroutine else None)
        ex = Execution(job, job_type, control, threading.current_thread(),
                       coroutine=job_type.is_coroutine)
        with self._lock:
            self._running[ex] = None
        return ex

    def _confirm_lease(self, job: ClaimedJob, job_type: JobType) -> bool | None:
        """Ask the database whether the job's execution still owns it, renewing its lease
        if so (True); False if it was recovered or taken over; None if it cannot tell."""
        try:
            with self.pool.connection() as conn:
                sent = lease.now()
                row = JobStore(conn).first(Q.save_progress, {  # progress None: a renewal
                    "job_id": job.id, "execution_id": job.execution_id, "progress": None,
                    "checkpoint": None})
        except DB_UNREACHABLE as exc:
            log.warning("job %s: cannot confirm its lease before starting it (%s); asking "
                        "again in %.1fs", job.id, exc, CONFIRM_RETRY_SECONDS,
                        extra=waiting_event("lease_unconfirmed", job))
            return None
        if row is None:
            return False
        job.granted_at = sent
        job.cancel_requested = job.cancel_requested or row[0]
        return True

    def _run(self, ex: Execution) -> None:
        run = ex.control
        try:
            outcome = runner.run_handler(ex.job_type, run, ex.job.payload)
            if self._keeps(ex, outcome):
                assert outcome is not None
                self._hand_over(ex, outcome)
            elif ex.abandoned:
                run.close_transaction(commit=False)
        except Exception:
            log.exception("job %s: unexpected error in the runner", run.job_id)
        finally:
            self._ended(ex)

    def _keeps(self, ex: Execution, outcome: runner.Outcome | None) -> bool:
        """Once the handler returned: whether its outcome is to be recorded (False: it was
        abandoned meanwhile, or its lease was lost, and the result is discarded)."""
        run = ex.control
        self._note_duration(run)
        with ex.lock:
            if ex.abandoned:
                log.warning("job %s: handler returned after being abandoned; result "
                            "discarded", run.job_id, extra=running_event("result_discarded", run))
                return False
            ex.recording = True
        if outcome is None:
            log.warning("job %s: execution %s lost its lease; result discarded",
                        run.job_id, run.execution_id,
                        extra=running_event("result_discarded", run))
            return False
        return True

    def _ended(self, ex: Execution) -> bool:
        """The execution is over: no longer running, its slot given back (True if this
        gave it back; an abandonment may have already). Called once its handler returned."""
        self._retire(ex)
        return self._free(ex)

    def _retire(self, ex: Execution) -> None:
        """_ended but for the slot: no longer running, its handler's references dropped."""
        with self._lock:
            self._running.pop(ex, None)
        ex.control.forget_handler()

    # -- coroutine handlers --------------------------------------------------------------
    def _more_coroutines(self, batch: list[Execution]) -> list[Execution]:
        """`batch` and the coroutine jobs waiting right behind it, as many as there are
        free slots (at most DISPATCH_BATCH), without waiting for any."""
        while len(batch) < DISPATCH_BATCH and self._slots_free.acquire(blocking=False):
            job = self.buffer.take_next_if(self._runs_on_loop)
            if job is None:
                self._slots_free.release()
                break
            ex = self.begin(job)
            if ex is UNDECIDED or ex is None:
                self._slots_free.release()
                if ex is UNDECIDED:
                    self.buffer.put_back(job)
                    break
                continue
            batch.append(ex)
        return batch

    def _start_tasks(self, batch: list[Execution]) -> None:
        if not batch:
            return
        lane_loop = self.loop()

        def start() -> None:  # on the loop
            for ex in batch:
                ex.task = lane_loop.loop.create_task(self._run_async(ex, lane_loop))

        lane_loop.call(start)

    async def _run_async(self, ex: Execution, lane_loop: LaneLoop) -> None:
        """A task on the lane's loop: runs `ex`, then each execution its slot is passed on
        to (_pass_slot_on), in turn. The next job's handler so starts in the step that
        ended the last one, not in a step of a task of its own one loop iteration later,
        after every other job that ended in the same iteration has been handed over:
        with 500 handlers in flight that wait was most of a job's time outside its
        handler (bench/README.md@eb7c2f0, "One task per slot")."""
        current = ex
        try:
            while True:
                await self._run_one_async(current, lane_loop)
                following = self._pass_slot_on(current)
                if following is None:
                    return
                current = following
        except BaseException as exc:
            self._ended(current)  # not passed on: given back (if not already)
            if not isinstance(exc, asyncio.CancelledError):
                # Said now: a task's exception is otherwise only told when the task is
                # collected, if ever (an abandoned execution keeps its task).
                log.error("lane %s: the task running job %s failed", self.name,
                          current.job.id, exc_info=exc,
                          extra={"action": "lane_task_failed", "job_id": current.job.id})
            raise

    async def _run_one_async(self, ex: Execution, lane_loop: LaneLoop) -> None:
        """_run for a coroutine handler, in the current task on the lane's loop."""
        run = ex.control
        task = asyncio.current_task()
        assert task is not None
        ex.task = task
        while task.cancelling():  # what an earlier execution's cancel left counted
            task.uncancel()

        def cancel() -> None:  # on the loop: never once the outcome is being handed over
            if not ex.recording and not task.done():
                task.cancel()

        run.on_cancel = lambda: lane_loop.call(cancel)
        if run.cancel_requested:  # asked before the task existed
            cancel()
        try:
            outcome = await runner.run_handler_async(ex.job_type, run, ex.job.payload)
            if self._keeps(ex, outcome):
                assert outcome is not None
                await self._hand_over_async(ex, outcome)
            elif ex.abandoned:
                await run.close_async_transaction(commit=False)
        except Exception:
            log.exception("job %s: unexpected error in the runner", run.job_id)

    def _pass_slot_on(self, ex: Execution) -> Execution | None:
        """As a coroutine execution ends, on its loop: its slot goes straight to the next
        coroutine job in the buffer, begun here and returned for the same task to run,
        when begin() needs no database for it (its lease vouched for by the clock);
        otherwise the slot is given back and the slot thread takes the next job. That
        saves, per job, the slot thread's wake-up and a hop back to the loop
        (bench/README.md@eb7c2f0, "Full collections"). None: the task ends."""
        self._retire(ex)
        if not self._take_slot_back(ex):
            return None  # abandoned: the slot was given back then
        while (job := self.buffer.take_next_if(self._begins_on_loop)) is not None:
            following = self.begin(job)
            if isinstance(following, Execution):
                return following
            # None: it must not run (its lease was lost, or it was cancelled meanwhile)
        self._slots_free.release()
        if not len(self.buffer):
            self._on_slot_free(ex.job)  # no slot thread to say so: it went on long ago
        return None

    def _begins_on_loop(self, job: ClaimedJob) -> bool:
        """A coroutine job the loop may begin itself: begin() asks the database about a
        lease the clock cannot vouch for, and the loop must never wait on that."""
        job_type = self._loop_type(job)
        return job_type is not None and lease.vouched(job.granted_at, job_type.lease)

    async def _hand_over_async(self, ex: Execution, outcome: runner.Outcome) -> None:
        """_hand_over for a coroutine handler's AsyncConnection transaction."""
        run, lease = ex.control, ex.job_type.lease
        if run.async_transaction_conn is not None:
            if outcome.status is JobStatus.COMPLETED:
                try:
                    await runner.complete_in_transaction_async(run, outcome, lease)
                    return
                except runner.CommitUncertain as exc:
                    outcome = self._commit_uncertain(ex, exc)
            else:
                await run.close_async_transaction(commit=False)
        self.completer.submit(runner.completion(run, outcome, lease))

    @staticmethod
    def _commit_uncertain(ex: Execution, exc: runner.CommitUncertain) -> runner.Outcome:
        """The outcome when the connection died around the business commit: a retry,
        which the guard refuses if the commit did go through."""
        run = ex.control
        log.warning("job %s: the database went away while committing its completion (%s); "
                    "scheduling a retry unless the commit went through", run.job_id, exc,
                    extra={"action": "commit_uncertain", "job_id": run.job_id})
        return runner.retry_or_fail(ex.job_type, run.attempt, run.max_attempts,
                                    "DB_UNAVAILABLE", f"connection lost while committing: {exc}")

    def _note_duration(self, run: ExecutionControl) -> None:
        seconds = time.monotonic() - run.started
        avg = self.job_seconds
        self.job_seconds = seconds if avg is None else avg + (seconds - avg) * 0.05

    def loop_lag(self) -> float | None:
        """The worst lag of the lane's loop since the last call, in seconds (None: the
        lane has no loop). Called by the heartbeat thread, for the worker's row."""
        lane_loop = self._loop
        return None if lane_loop is None else lane_loop.take_lag()

    def watch_loop(self) -> None:
        """Log a stall of the lane's loop (once per stall), and ask for a restart when an
        abandoned handler holds it. Called by the watchdog thread, every WATCH_SECONDS."""
        lane_loop = self._loop
        if lane_loop is None:
            return
        lane_loop.check_stall(lambda: [ex.job.id for ex in self.running() if ex.coroutine])
        with self._lock:
            stuck = [e.job.id for e in self._abandoned if e.coroutine and e.alive()]
        if stuck and lane_loop.stalled_for() >= self.timeout_grace \
                and self._on_loop_stuck is not None:
            self._on_loop_stuck(f"lane {self.name}: its event loop has been held for "
                                f"{lane_loop.stalled_for():.1f}s, with abandoned job(s) "
                                f"{stuck} on it")

    def _hand_over(self, ex: Execution, outcome: runner.Outcome) -> None:
        """Give the outcome to the completer, or complete in the handler's business
        transaction when it has one."""
        run, lease = ex.control, ex.job_type.lease
        if run.transaction_conn is not None:
            if outcome.status is JobStatus.COMPLETED:
                try:
                    runner.complete_in_transaction(run, outcome, lease)
                    return
                except runner.CommitUncertain as exc:
                    outcome = self._commit_uncertain(ex, exc)
            else:
                run.close_transaction(commit=False)
        self.completer.submit(runner.completion(run, outcome, lease))

    # -- giving up on handlers -------------------------------------------------------------
    def abandon(self, ex: Execution, outcome: runner.Outcome | None) -> bool:
        """Stop waiting for a handler: free its slot (a new thread takes it) and, unless
        outcome is None (a shutdown hand-back), record the outcome. Its thread's (or
        task's) later result is ignored. False if it already finished."""
        with ex.lock:
            if ex.recording or ex.abandoned:
                return False
            ex.abandoned = True
        ex.control.request_cancel()  # a task is cancelled too (ExecutionControl.on_cancel)
        with self._lock:
            self._running.pop(ex, None)
            self._abandoned = [e for e in self._abandoned if e.alive()]
            if ex.alive():
                self._abandoned.append(ex)
        if outcome is not None:
            # The handler's own transaction is left to its thread, which rolls it back.
            self.completer.submit(runner.completion(ex.control, outcome, ex.job_type.lease))
        self._free(ex)
        if not ex.coroutine and not self.buffer.closed:
            self._start_slot()
        self._on_slot_free(None)
        self._on_abandoned()
        return True

    def abandoned_alive(self) -> int:
        with self._lock:
            return sum(1 for e in self._abandoned if e.alive())

    def enforce_timeouts(self) -> None:
        """Ask handlers past their timeout to stop; abandon those that do not in time.
        Called every WATCH_SECONDS by the watchdog (and at each heartbeat)."""
        with self._timeouts_lock:
            self._enforce_timeouts()

    def _enforce_timeouts(self) -> None:
        now = time.monotonic()
        for ex in self.running():
            run = ex.control
            left = run.time_left
            if left is None or left > 0 or run.lease_lost or ex.abandoned:
                continue
            if ex.timeout_noticed is None:
                # First ask the handler to stop (ctx.cancel_requested turns true) ...
                ex.timeout_noticed = now
                run.time_out()
                log.warning("job %s exceeded its %ss timeout: asking it to stop",
                            run.job_id, ex.job_type.timeout,
                            extra=running_event("job_timeout", run))
            elif now - ex.timeout_noticed >= self._timeout_grace_for(ex):
                # ... then stop waiting for it: the slot is freed, the retry scheduled.
                outcome = runner.classify(None, run, ex.job_type)
                if self.abandon(ex, outcome):
                    log.warning("job %s ignored its timeout: abandoned (%s)", run.job_id,
                                outcome.status.value,
                                extra=running_event("job_abandoned", run, outcome.error_code))

    def _timeout_grace_for(self, ex: Execution) -> float:
        """How long a timed-out handler gets to stop: `timeout_grace`, but never more
        than its own timeout (a 1s job is not given 5s more) and at least 1s."""
        return min(self.timeout_grace, max(1.0, ex.job_type.timeout or 0.0))
