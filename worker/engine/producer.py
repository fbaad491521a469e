"""The producer: claims jobs in batches, ahead of free slots, into a bounded local buffer.

A slot that finishes a job takes the next one from the buffer at once instead of
waiting for a round trip to PostgreSQL, and one claim statement serves many jobs.

How far ahead it claims is bounded twice: never more than `buffer_size` jobs wait, and
never more than about `horizon` seconds of work (the jobs' recent duration times the
number of slots). A worker whose jobs take seconds therefore claims only for its free
slots and leaves the rest to other workers, while one running no-op jobs keeps a full
buffer. Jobs waiting in the buffer hold a lease like running ones: the heartbeat
renews them too, and learns when one was cancelled or lost meanwhile.

Between claims it sleeps on its `Wakeup` (a low buffer, a freed slot, recovered jobs, a
stop) and, where it LISTENs on its claim connection (`listens`), on that connection's
socket too: a notification for a queue of its lane wakes this thread, which claims at
once on the connection that received it, with no other thread in between. A
(re)connected claim connection LISTENs before its first claim, so a job committed while
nobody listened is seen by that claim (docs/architecture.md §6, "Waking a producer").

Running the first job. A producer given its lane's executor as `runner` claims on two
threads that take turns: one holds the role of claiming and listening, the other waits
for it. When a claim's first job is a thread handler's and a slot is free, the thread
that claimed it takes the slot, begins the job, passes the role to the waiting thread
and runs the handler itself, as a slot thread would; the rest of the claim goes to the
buffer. An idle lane's job so starts on the thread its notification woke, without the
wake-up of a slot thread between the claim and the handler (bench/README.md@eb7c2f0,
"Enqueue→start tail"). With the other thread busy running a job, or no slot free, the
claim goes to the buffer whole, as without a runner. Neither thread is the main
thread: `run()` waits for the claiming to end, so a signal's handler still runs there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Literal, Protocol
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from jobwarden.worker.core import lease
from jobwarden.worker.core.dberrors import DB_UNREACHABLE, Backoff
from jobwarden.worker.core.logs import waiting_event
from jobwarden.worker.engine.config import DEFAULT_BUFFER_SIZE, DEFAULT_CLAIM_BATCH
from jobwarden.worker.engine.limits import LimitedClaim, limited_waiting, lock_scopes, refill_wait
from jobwarden.worker.engine.listener import Wakeup, listen_on, read_notifies
from jobwarden.worker.jobs.registry import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, JobType
from jobwarden.worker.store.db import DedicatedConnection, pooled
from jobwarden.worker.store.jobstore import JobStore, PreparedQuery
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.producer")

#: Most limited claims in a row while each takes some jobs and slots are still free: one
#: per key (or bucket) whose tokens a claim's batch spends before it reaches the next.
LIMITED_ROUNDS = 8


@dataclass(slots=True, eq=False)
class ClaimedJob:
    """One job as claim_jobs hands it over (columns in the query's order)."""

    id: int
    queue: str
    type: str
    version: int
    payload: dict[str, Any]
    priority: int
    attempt: int
    max_attempts: int
    execution_id: UUID
    checkpoint: Any
    idempotency_key: str | None
    #: How often earlier executions snoozed the job (a type's max_snoozes bounds it).
    snoozes: int
    #: Its concurrency key (None: it has none): its end may let the key's next job start.
    concurrency_key: str | None = None
    #: The batch it is a member of (None: none): its outcome is counted there.
    batch_id: int | None = None
    #: The trace it was enqueued in, as the propagator wrote it (None: none).
    trace_context: str | None = None
    #: Its fair key (claim_fair_jobs only; None: claimed by another claim, or none),
    #: and that key's place in its claim's walk (fair_cursor).
    fair_key: str | None = None
    fair_step: int | None = None
    #: Learned by a heartbeat while the job waited in the buffer.
    cancel_requested: bool = False
    #: Its lease was lost while it waited (the worker froze past it): never start it.
    lost: bool = False
    #: When (worker/core/lease.py's clock) the statement that last granted its lease was sent:
    #: the claim, then each heartbeat that renewed it. None: not known to be held.
    granted_at: float | None = None


def claim_params(*, types: list[str], leases: list[float], queues: list[str] | None,
                 limit: int, worker_id: str, skip_queues: list[str] | None = None,
                 limits: list[int] | None = None, type_queues: list[str] | None = None,
                 type_max_attempts: list[int] | None = None) -> dict[str, Any]:
    """claim_jobs' parameters (claim()'s keywords): the handled types' policy as one object
    keyed by type, which the statement reads by `->` (worker/store/sql/queries.sql)."""
    n = len(types)
    policy = {t: {"lease": lease, "limit": lim, "queue": queue, "max_attempts": attempts}
              for t, lease, lim, queue, attempts in zip(
                  types, leases, limits or [1] * n, type_queues or [DEFAULT_QUEUE] * n,
                  type_max_attempts or [DEFAULT_MAX_ATTEMPTS] * n, strict=True)}
    return {"types": types, "policy": Jsonb(policy), "queues": queues,
            "skip_queues": skip_queues, "limit": limit, "worker_id": worker_id}


def claim(conn: psycopg.Connection, *, types: list[str], leases: list[float],
          queues: list[str] | None, limit: int, worker_id: str,
          skip_queues: list[str] | None = None, limits: list[int] | None = None,
          type_queues: list[str] | None = None,
          type_max_attempts: list[int] | None = None,
          limited: LimitedClaim | None = None) -> list[ClaimedJob]:
    """Claim up to `limit` jobs in one statement (committed by the caller's connection):
    of `queues` (None: any) but not of `skip_queues` (the other lanes' own queues).

    `leases`, `limits` (each type's concurrency_limit; 1 for every type if not given),
    `type_queues` and `type_max_attempts` (the declared policy a job that took the
    documented defaults gets; those defaults if not given) are parallel to `types`.
    `limited`: claim only the rate-limited or capped work it names, within its tokens and
    caps; the caller holds its scopes' locks (`lock_scopes`) in the same transaction."""
    params = claim_params(types=types, leases=leases, queues=queues, limit=limit,
                          worker_id=worker_id, skip_queues=skip_queues, limits=limits,
                          type_queues=type_queues, type_max_attempts=type_max_attempts)
    # Prepared from the first claim: a claim connection plans it once (prepare_claims).
    if limited is None:
        return JobStore(conn).records(Q.claim_jobs, params, ClaimedJob, prepare=True)
    return JobStore(conn).records(Q.claim_limited_jobs, {**params, **limited.params},
                                  ClaimedJob, prepare=True)


#: Most distinct fair keys one fair claim walks (one index probe each): over claims the
#: walk goes round every key (claim_fair_jobs' `after`).
FAIR_WALK_KEYS = 200


#: How long, in multiples of the plain claim that found no plain work beside a fair
#: backlog, its rest lasts at least once a notification came for the lane (it may be for
#: plain work): reading past the backlog then takes at most about 1/20 of the lane's
#: time however often jobs are enqueued, and a plain job enqueued meanwhile waits that
#: long (0.2-0.3 s behind 20,000 fair jobs on a busy 2-core machine), not a poll
#: interval (docs/guide/fair-share.md).
PLAIN_REST_FACTOR = 20


#: Most fair claims in a row while each takes some jobs and the batch is not full: a
#: key with fewer jobs than its share leaves the rest of the batch to the next round,
#: whose walk no longer meets that key.
FAIR_ROUNDS = 4


def fair_params(c: ClaimSpec, limit: int, after: str | None,
                limited: LimitedClaim | None = None) -> dict[str, Any] | None:
    """claim_fair_jobs' parameters for lane `c` (None: it has no fair type the `limited`
    claim leaves to it)."""
    fair = set(c.fair_types or ()) - set(limited.types if limited else ())
    keep = [i for i, t in enumerate(c.types) if t in fair]
    if not keep:
        return None
    skip = c.skip_queues if limited is None or not limited.queues else sorted(
        set(c.skip_queues or []) | set(limited.queues))
    params = claim_params(types=[c.types[i] for i in keep],
                          leases=[c.leases[i] for i in keep], queues=c.queues, limit=limit,
                          worker_id=c.worker_id, skip_queues=skip,
                          limits=_pick(c.limits, keep), type_queues=_pick(c.type_queues, keep),
                          type_max_attempts=_pick(c.type_max_attempts, keep))
    weights = c.fair_weights or {}
    params.update(after=after, keys=min(FAIR_WALK_KEYS, limit), weight_keys=list(weights) or None,
                  weights=list(weights.values()) or None)
    return params


def claim_fair(conn: psycopg.Connection, c: ClaimSpec, limit: int, after: str | None,
               limited: LimitedClaim | None = None,
               prepared: PreparedQuery | None = None) -> list[ClaimedJob]:
    """A lane's fair claim (claim_fair_jobs): up to `limit` jobs of its fair types, each
    key in turn, the walk starting after the key `after`. The `limited` claim's types and
    queues are left to it (a limit wins over fairness). One statement: its batch may be
    short of `limit` while jobs wait (fair_rounds). `prepared`: the lane's own, prepared
    on `conn` with the parameters of a claim without `limited` dumped ahead
    (Producer._connection), which such a claim runs."""
    if limited is None and prepared is not None and prepared.prepared_on(conn):
        return prepared.records(conn, ClaimedJob, limit=limit, after=after,
                                keys=min(FAIR_WALK_KEYS, limit))
    params = fair_params(c, limit, after, limited)
    if params is None:
        return []
    return JobStore(conn).records(Q.claim_fair_jobs, params, ClaimedJob, prepare=True)


def fair_rounds(conn: psycopg.Connection, c: ClaimSpec, limit: int, after: str | None,
                limited: LimitedClaim | None = None,
                prepared: PreparedQuery | None = None) -> tuple[list[ClaimedJob], str | None]:
    """Fair claims until the batch is full, one takes nothing, or FAIR_ROUNDS: the jobs,
    and the key the next claim's walk starts after."""
    jobs: list[ClaimedJob] = []
    for _ in range(FAIR_ROUNDS):
        got = claim_fair(conn, c, limit - len(jobs), after, limited, prepared)
        after = fair_cursor(got) or after
        jobs += got
        if not got or len(jobs) >= limit:
            break
    return jobs, after if jobs else None


def fair_weights(types: Iterable[JobType]) -> dict[str, int] | None:
    """The lane's fair weights, key by key: the largest any of its types declares."""
    out: dict[str, int] = {}
    for t in types:
        for key, weight in t.fair_weights.items():
            out[key] = max(weight, out.get(key, 1))
    return out or None


def fair_cursor(jobs: list[ClaimedJob]) -> str | None:
    """The key the next fair claim's walk starts after: the last key (in the walk's order,
    as the server's collation sorts keys) this claim took a job of. None (start from the
    first key) when it took none."""
    return max(jobs, key=attrgetter("fair_step")).fair_key if jobs else None


def prepare_claims(conn: psycopg.Connection) -> None:
    """A new claim connection's first statements: its session plans its prepared
    statements generically from their first run (Q.claim_plans_generic says why), so its
    first claim is planned once and every later one reuses that plan, until
    DedicatedConnection.handled drops it (a batch that outgrew it, or its age) and the
    next claim is planned for the tables as they are then; and its claims commit without
    waiting for the WAL flush (Q.claim_commits_async says why that is safe). Not
    through a transaction pooler: nothing is prepared there, and a SET would stay on a
    server connection that other clients' transactions share.

    The claim is not run ahead of need to plan it sooner: a claim of no job fires the
    row-count triggers with empty transition tables, and PL/pgSQL keeps the plans it
    makes then for the session, estimated for no rows. Drains of 50,000 jobs ran 8-12%
    slower with such a warm-up claim (bench/README.md@eb7c2f0, 2026-12-04)."""
    if not pooled():
        JobStore(conn).rows(Q.claim_plans_generic)
        JobStore(conn).rows(Q.claim_commits_async)


class Slots:
    """A lane's free slots (worker/engine/executor.py): threading.BoundedSemaphore's
    acquire and release, which every job takes and gives back. The semaphore is Python
    around a Condition, and its release ran the Condition's notify (a deque made, the
    lock probed) with no thread waiting: about 2 us a job on a 2-core machine. Here a
    count under a lock, and the Condition only for a thread that waits for a slot."""

    __slots__ = ("_lock", "_cond", "_free", "_size", "_waiting")

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._free = self._size = size
        self._waiting = 0  # threads waiting in acquire()

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take a slot: False when none is free (without waiting unless `blocking`) or
        none came free within `timeout` seconds (None: wait for one)."""
        with self._lock:
            if self._free:
                self._free -= 1
                return True
            if not blocking:
                return False
            self._waiting += 1
            try:
                if not self._cond.wait_for(self._any_free, timeout):
                    return False
            finally:
                self._waiting -= 1
            self._free -= 1
            return True

    def _any_free(self) -> bool:
        return self._free > 0

    def release(self) -> None:
        """Give a slot back; one given back that was never taken is a bug of the caller's
        (ValueError, as the semaphore raised)."""
        with self._lock:
            if self._free >= self._size:
                raise ValueError("Slots released too many times")
            self._free += 1
            if self._waiting:
                self._cond.notify()


class JobBuffer:
    """Claimed jobs waiting for a free slot, first claimed first out."""

    def __init__(self, on_low: Callable[[], None] | None = None) -> None:
        self._jobs: deque[ClaimedJob] = deque()
        # A plain lock, taken directly by the takes (`with self._lock`): a Condition's
        # own `with` is two Python calls more per job, and nothing here re-enters.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._closed = False
        #: When a take leaves this many jobs or fewer, `on_low` asks for more.
        self.low_water = 0
        self._on_low = on_low

    def __len__(self) -> int:
        return len(self._jobs)

    @property
    def closed(self) -> bool:
        return self._closed

    def put(self, jobs: list[ClaimedJob]) -> None:
        with self._lock:
            self._jobs.extend(jobs)
            self._cond.notify(len(jobs))

    def take_with_slot(self, slots: Slots,
                       timeout: float) -> ClaimedJob | None | Literal[False]:
        """The next job with a slot for it (taken from `slots` without waiting), once a job
        waits or after `timeout` (None; also once closed); False when a job waits but no
        slot is free. A slot thread takes its slot with its job rather than before
        waiting for one, so that an idle lane's slots stay free for its producer to run a
        job itself (Producer, "Running the first job")."""
        with self._lock:
            if not self._jobs and not self._closed:
                self._cond.wait(timeout)
            if self._closed or not self._jobs:
                return None
            if not slots.acquire(blocking=False):
                return False
            job = self._jobs.popleft()
            low = len(self._jobs) <= self.low_water
        return self._taken(job, low)

    def take_next_if(self, wanted: Callable[[ClaimedJob], bool]) -> ClaimedJob | None:
        """The next job if there is one now and it is `wanted`, without waiting (a slot
        gathering jobs of one kind)."""
        with self._lock:
            if self._closed or not self._jobs or not wanted(self._jobs[0]):
                return None
            job = self._jobs.popleft()
            low = len(self._jobs) <= self.low_water
        return self._taken(job, low)

    def _taken(self, job: ClaimedJob, low: bool) -> ClaimedJob:
        """After a take, outside the lock: a buffer run low asks the producer for more."""
        if low and self._on_low is not None:
            self._on_low()
        return job

    def put_back(self, job: ClaimedJob) -> bool:
        """Return a job taken but not started to the front (False: the buffer is closed,
        and the job was not among those it handed back)."""
        with self._cond:
            if self._closed:
                return False
            self._jobs.appendleft(job)
            self._cond.notify()
        return True

    def snapshot(self) -> list[ClaimedJob]:
        with self._cond:
            return list(self._jobs)

    def mark_lost(self, jobs: list[ClaimedJob]) -> list[ClaimedJob]:
        """Mark lost those of `jobs` that still wait here (a heartbeat found their leases
        gone); returns the ones it marked. A job a slot took since the heartbeat read the
        buffer is left alone: it may have run and finished meanwhile, which is why the
        heartbeat no longer found it running, and else begin() finds its lease gone."""
        with self._cond:
            here = {id(job) for job in self._jobs}
            marked = [job for job in jobs if id(job) in here and not job.lost]
            for job in marked:
                job.lost = True
        return marked

    def close(self) -> list[ClaimedJob]:
        """Stop handing out jobs; returns those never started (to be handed back)."""
        with self._cond:
            self._closed = True
            left = list(self._jobs)
            self._jobs.clear()
            self._cond.notify_all()
        return left


class Renewal(Protocol):
    """The worker's heartbeat as its producers see it (worker/engine/heartbeat.py): a
    job is claimed only while its lease can be renewed."""

    def renewing(self, since: float | None = None) -> bool: ...

    def ask_beat(self) -> None: ...


class SlotRunner(Protocol):
    """The lane's executor as a producer thread sees it when it runs a job it claimed
    (worker/engine/executor.py: take_slot_for, begin_in_slot, run_begun)."""

    def take_slot_for(self, job: ClaimedJob) -> bool: ...

    def begin_in_slot(self, job: ClaimedJob) -> Any: ...

    def run_begun(self, ex: Any) -> bool: ...


@dataclass(frozen=True, kw_only=True)
class ClaimSpec:
    """What one lane's claims ask for (the keywords of claim(), less `limit`): the
    worker's types with their leases and declared policy, parallel lists, and the lane's
    queues (None: any) less `skip_queues` (the other lanes' own)."""

    types: list[str]
    leases: list[float]
    worker_id: str
    queues: list[str] | None = None
    skip_queues: list[str] | None = None
    limits: list[int] | None = None
    type_queues: list[str] | None = None
    type_max_attempts: list[int] | None = None
    #: The types with a fair key (claim_fair_jobs takes them; the plain claim, the rest),
    #: and the weights they declare, key by key (the largest when two types differ).
    fair_types: list[str] | None = None
    fair_weights: dict[str, int] | None = None

    @property
    def plain_types(self) -> list[str]:
        """The types the plain claim takes: all but the fair ones."""
        fair = set(self.fair_types or ())
        return [t for t in self.types if t not in fair] if fair else self.types


@dataclass(frozen=True, kw_only=True)
class ProducerSettings:
    """How far ahead a producer claims, and how often it looks when nothing wakes it."""

    claim_batch: int = DEFAULT_CLAIM_BATCH  # most jobs one claim takes
    buffer_size: int = DEFAULT_BUFFER_SIZE  # most jobs waiting in the buffer
    horizon: float = 0.1  # about this many seconds of work wait for the slots
    poll_interval: float = 2.0


class Producer:
    """Keeps the buffer filled: the claim loop of one lane of a worker process."""

    def __init__(self, *, conn: DedicatedConnection, claims: ClaimSpec, buffer: JobBuffer,
                 concurrency: int, running: Callable[[], int],
                 job_seconds: Callable[[], float | None], wake: Wakeup,
                 stop: threading.Event,
                 settings: ProducerSettings = ProducerSettings(),
                 limits: Callable[[], LimitedClaim | None] | None = None,
                 listens: bool = False, serves: Callable[[str], bool] | None = None,
                 runner: SlotRunner | None = None, name: str = "*",
                 renewal: Renewal | None = None) -> None:
        self._conn = conn
        #: The heartbeat that renews what this producer claims (None: none to wait for).
        self.renewal = renewal
        #: When (lease clock) the claim connection last failed, until a beat sent since
        #: went through: the heartbeat's connection may be as dead as that one was.
        self._cut_at: float | None = None
        #: Whether claims wait for the heartbeat now, and whether they ever went on: the
        #: wait for the first beat, at every start, is not worth a line in the log.
        self._paused = False
        self._renewed_before = False
        self.name = name  # the lane's label, in its threads' names
        self.claims = claims
        self.settings = settings
        self.buffer = buffer
        self.concurrency = concurrency
        self._running = running
        self._job_seconds = job_seconds
        self.wake = wake
        self.stop = stop
        #: The lane's limited work as the worker knows it now (None: nothing limited).
        self._limits = limits or (lambda: None)
        #: Set by a claim that left limited work waiting for tokens or room.
        self._held_back: LimitedClaim | None = None
        #: LISTEN on the claim connection (`serves`: the queues whose notifications wake
        #: this lane; None: every queue).
        self.listens = listens
        self._serves = serves
        #: The claim connection whose session LISTENs (None: not listening now), and the
        #: codec its notifications come in.
        self._listening: psycopg.Connection | None = None
        self._encoding: str | None = None
        #: The claim connection whose session plans generically (prepare_claims).
        self._prepared: psycopg.Connection | None = None
        #: The lane's unlimited claim, prepared by name on that connection with every
        #: parameter but its batch size dumped ahead (None: through a pooler, or not yet).
        self._claim_jobs: PreparedQuery | None = None
        #: The lane's fair claim (claim_fair_jobs) without limited work, prepared there
        #: likewise, every parameter but the batch size and the walk's start dumped ahead
        #: (None: no fair types, through a pooler, or not yet).
        self._claim_fair_jobs: PreparedQuery | None = None
        #: The fair key the next fair claim's walk starts after (fair_cursor), and until
        #: when (time.monotonic) a lane with fair types makes no plain claim: its last
        #: one found no plain work.
        self._fair_after: str | None = None
        self._plain_idle_until = 0.0
        #: A notification for the lane came since its last plain claim (it may be for
        #: plain work), and when (time.monotonic) that ends the rest.
        self._plain_noted = False
        self._plain_noted_after = 0.0
        #: A notification for this lane was read since the last claim began.
        self._notified = False
        #: Whether the last claim took all it asked for (there may be more waiting).
        self._last_full = True
        #: Whether the last claim found limited work in the lane (rate limits, live caps).
        self._limited = False
        #: Whether the claim loop sleeps before it claims again (the last claim was short).
        self._sleep_first = False
        self._backoff = Backoff()
        #: Running the first job (module docstring): the executor that lends a slot, the
        #: role of claiming, which one thread holds at a time, how many threads wait for
        #: it, and the end of the claiming (with the failure that ended it, if one did).
        self._runner = runner
        self._role = threading.Lock()
        self._standby = 0
        self._standby_lock = threading.Lock()
        self._done = threading.Event()
        self._failure: BaseException | None = None

    def ahead(self) -> int:
        """How many claimed jobs should wait in the buffer: about `horizon` seconds of
        work for all slots, at most `buffer_size`.

        None while durations are unknown, and none once less than one job fits the
        horizon: a job held in this buffer waits for one of this worker's slots while
        another worker may sit idle, so long jobs are claimed only for free slots (a
        freed slot wakes the producer; one claim round trip is nothing next to such a
        job). A worker's first jobs show their durations within moments."""
        seconds = self._job_seconds()
        if seconds is None:
            return 0
        return min(self.settings.buffer_size,
                   int(self.concurrency * self.settings.horizon / max(seconds, 1e-6)))

    def wanted(self) -> int:
        """Jobs to claim now (0: the buffer is full enough)."""
        ahead = self.ahead()
        # After a short claim (it took every runnable job there was) a buffer running low
        # is no reason to claim again: new jobs notify, a freed slot still wakes the
        # producer (a concurrency key may have room again), and the poll finds the rest.
        # Without this, every job of an idle worker cost an empty claim that ran beside
        # its handler's start (bench/README.md@eb7c2f0, "Enqueue→start tail").
        self.buffer.low_water = ahead // 2 if self._last_full else -1
        waiting = len(self.buffer)
        free = self.concurrency - self._running()
        if waiting > ahead // 2 and waiting >= free:
            return 0  # slots are busy and the buffer is not low yet: let it drain a little
        return max(0, min(self.settings.claim_batch, free + ahead - waiting))

    def slot_freed(self, job: ClaimedJob | None) -> None:
        """A slot of the lane is free and no claimed job waits for it: `job` ended (or was
        not started). Wake the claiming when that can have made a job claimable: when the
        last claim took all it asked for (more may wait), when `job` had a concurrency key
        (its key has room again) or the lane has limited work (a cap has room again).

        After a short claim (it took every job that was runnable) a keyless job's end makes
        nothing claimable: new jobs notify, jobs whose time comes are found by the poll.
        Claiming then found nothing, once per job of an idle worker, and a notification
        that came during that empty claim waited for it (bench/README.md@eb7c2f0, "Enqueue→start
        tail")."""
        if self._last_full or self._limited or job is None or job.concurrency_key is not None:
            self.wake.set()

    def run(self) -> None:
        """Claim until `stop` is set; sleep until woken (notification, low buffer, freed
        slot) or the poll interval passes. With a `runner`, two threads of this lane take
        turns at it and this call waits for the claiming to end (module docstring)."""
        self._prepare()
        if self._runner is None:
            self._lead(hand_over=False)  # only the stop ends it: nothing is run here
            self._finish()
            return
        for n in (1, 2):
            threading.Thread(target=self._member, name=f"producer-{self.name}.{n}",
                             daemon=True).start()
        self._done.wait()
        if self._failure is not None:
            raise self._failure

    def _prepare(self) -> None:
        """Make the claim connection ready (_connection) at the start, while the
        heartbeat's first beat is under way: the first claim waits for that beat
        (_renewable), and then found this still to do, a round trip per statement. A
        failure is left for the first claim, which connects again and backs off."""
        if self.stop.is_set():
            return
        try:
            self._connection()
        except DB_UNREACHABLE:
            self._listening = None
            self._conn.drop()

    def _member(self) -> None:
        """One of the two threads of a producer with a runner: claim while it holds the
        role; when a claim's first job can run here and the other thread waits to take
        the role over, begin that job, pass the role on and run it."""
        runner = self._runner
        assert runner is not None
        try:
            while True:
                # Back to the role even once stopped: the thread that holds it when the
                # stop comes ends the claiming (_finish), the other one then sees it ended.
                with self._standby_lock:
                    self._standby += 1
                with self._role:
                    with self._standby_lock:
                        self._standby -= 1
                    if self._done.is_set():
                        return
                    ex = None
                    while ex is None:
                        job = self._lead(hand_over=True)
                        if job is None:
                            self._finish()
                            return
                        # Begun while this thread holds the role: once the claiming ends
                        # (and the shutdown's drain starts), the job is one of the
                        # executor's running ones, handed back if it is still running.
                        ex = runner.begin_in_slot(job)
                if not runner.run_begun(ex):
                    return  # abandoned: this thread ends with its handler
        except BaseException as exc:
            self._failure = exc
            self._done.set()
            raise

    def _finish(self) -> None:
        """The claiming has ended (the stop): the claim connection and the wake-up go."""
        self._listening = None
        self._conn.drop()
        self.wake.close()
        self._done.set()

    def _lead(self, *, hand_over: bool) -> ClaimedJob | None:
        """The claim loop, until `stop` is set (None) or, with `hand_over`, until a claim's
        first job is for the calling thread to run: one it took a slot for, while another
        thread waits to claim on (the rest of the claim is in the buffer)."""
        while not self.stop.is_set():
            # The jobs of the last claim are handed on: no start waits for this.
            self._replan()
            if self._sleep_first:
                held = self._held_back
                self._sleep(refill_wait(held, self.settings.poll_interval) if held
                            else self.settings.poll_interval)
                if self.stop.is_set():
                    break
            self._sleep_first = True  # unless a full claim says there may be more
            self.wake.clear()
            self._notified = False
            want = self.wanted()
            if not want or not self._renewable():
                continue
            try:
                jobs = self._claim(want)
                self._backoff.reset()
            except psycopg.errors.UniqueViolation:
                # Another worker took the same slot of a concurrency_key in the same
                # instant; the index refused ours. Claim again: the next claim sees
                # that slot taken (and skips the key if it has no other free one).
                log.debug("claim lost a concurrency_key race; claiming again")
                self._sleep_first = False
                continue
            except DB_UNREACHABLE as exc:
                self._listening = None
                self._conn.drop()
                self._cut_at = lease.now()
                wait = self._backoff.next()
                log.warning("claim failed (%s); retrying in %.1fs", exc, wait,
                            extra={"action": "db_unavailable"})
                self.stop.wait(wait)
                self._sleep_first = False
                continue
            self._last_full = len(jobs) == want
            self._sleep_first = not self._last_full  # a full claim: there may be more
            if not jobs:
                continue
            if log.isEnabledFor(logging.DEBUG):
                for job in jobs:
                    log.debug("job %s %s claimed (attempt %s/%s)", job.id, job.type,
                              job.attempt, job.max_attempts,
                              extra=waiting_event("job_claimed", job))
            if hand_over and self._may_run_here(jobs[0]):
                if len(jobs) > 1:
                    self.buffer.put(jobs[1:])
                return jobs[0]
            self.buffer.put(jobs)
        return None

    def _renewable(self) -> bool:
        """Whether a job claimed now keeps its lease: the heartbeat's beats go through,
        and since this producer's connection last failed, one did. Else the heartbeat
        is asked to beat now and the claim waits; the heartbeat wakes the producers
        once a beat goes through again (`on_renewing`), the poll interval at the latest.
        A claim made while the beats fail is work whose lease lapses under a live worker
        and is run again elsewhere (docs/faults.md, "Heartbeat, claims and recovery")."""
        renewal = self.renewal
        if renewal is None:
            return True
        if renewal.renewing(self._cut_at):
            self._cut_at = None
            if self._paused:
                self._paused = False
                if self._renewed_before:
                    log.info("claiming again: the heartbeat renews leases",
                             extra={"action": "claims_resumed"})
            self._renewed_before = True
            return True
        renewal.ask_beat()
        if not self._paused:
            self._paused = True
            if self._renewed_before:
                log.warning("claims wait: the heartbeat cannot renew leases yet",
                            extra={"action": "claims_paused"})
        return False

    def _replan(self) -> None:
        """Make the claim connection's plans again if its last claim found them due
        (DedicatedConnection.handled), the unlimited claim's own at once: a claim of no
        jobs through the prepared statement plans it, and the trigger's statements,
        and changes no row (LIMIT 0). So the claim that a notification sends next runs on
        plans made, as every other does."""
        self._conn.replan(self._plan_claim)

    def _plan_claim(self, conn: psycopg.Connection) -> None:
        prepared = self._claim_jobs
        if prepared is not None and prepared.prepared_on(conn):
            prepared.records(conn, ClaimedJob, limit=0)
        fair = self._claim_fair_jobs
        if fair is not None and fair.prepared_on(conn):
            fair.records(conn, ClaimedJob, limit=0, after=None, keys=0)

    def _may_run_here(self, job: ClaimedJob) -> bool:
        """Whether the thread that claimed `job` runs it: another thread waits to take
        the claiming over, and a slot is free for it (taken here)."""
        with self._standby_lock:
            waiting = self._standby > 0
        return waiting and self._runner is not None and self._runner.take_slot_for(job)

    @property
    def listening(self) -> bool:
        """Whether this producer's claim connection LISTENs now."""
        return self._listening is not None

    def _sleep(self, timeout: float) -> None:
        """Wait for the wake-up (which a notification for this lane sets) or `timeout`;
        notifications for other lanes' queues are read and slept through."""
        conn = self._listening
        if conn is None or conn.closed:
            self.wake.wait(timeout)
            return
        deadline = time.monotonic() + timeout
        enc = self._encoding
        try:
            read_notifies(conn, self._noted, consume=False, encoding=enc)
            while (not self._notified and not self.wake.is_set()
                   and (left := deadline - time.monotonic()) > 0):
                if self.wake.wait(left, conn.fileno()):
                    read_notifies(conn, self._noted, encoding=enc)
        except DB_UNREACHABLE as exc:
            # Reconnected (and LISTENing again) by the next claim, which finds whatever
            # was enqueued meanwhile; the claim's backoff paces the attempts.
            log.warning("LISTEN connection lost (%s); reconnecting", exc,
                        extra={"action": "listen_reconnect"})
            self._listening = None
            self._conn.drop()
            self._cut_at = lease.now()

    def _noted(self, queue: str) -> None:
        """A notification on the claim connection (while it waits, or during a claim):
        read on this thread, so a flag says it, not the wake-up's pipe (a write and a
        read of it for a thread that is awake already)."""
        if self._serves is None or self._serves(queue):
            self._notified = True
            self._plain_noted = True

    def _connection(self) -> psycopg.Connection:
        """The claim connection; a new one is set to plan its claims once
        (prepare_claims), then LISTENs when this producer listens."""
        conn = self._conn.get()
        if conn is not self._prepared:
            prepare_claims(conn)
            if not pooled():
                c = self.claims
                if self._claim_jobs is None:
                    keep = [i for i, t in enumerate(c.types) if t in c.plain_types]
                    self._claim_jobs = PreparedQuery(Q.claim_jobs, claim_params(
                        types=c.plain_types, leases=[c.leases[i] for i in keep],
                        queues=c.queues, limit=0, worker_id=c.worker_id,
                        skip_queues=c.skip_queues, limits=_pick(c.limits, keep),
                        type_queues=_pick(c.type_queues, keep),
                        type_max_attempts=_pick(c.type_max_attempts, keep)),
                        ("limit",), conn)
                self._claim_jobs.prepare(conn)
                if self._claim_fair_jobs is None and c.fair_types:
                    params = fair_params(c, 0, None)
                    if params is not None:
                        self._claim_fair_jobs = PreparedQuery(
                            Q.claim_fair_jobs, params, ("limit", "after", "keys"), conn)
                if self._claim_fair_jobs is not None:
                    self._claim_fair_jobs.prepare(conn)
            self._prepared = conn
        if self.listens and conn is not self._listening:
            self._listening = None
            self._encoding = listen_on(conn, self._noted)
            self._listening = conn
        return conn

    def _claim(self, limit: int) -> list[ClaimedJob]:
        conn = self._connection()
        sent = lease.now()  # the leases the claim grants start no earlier than this
        c = self.claims
        limited = self._limits()
        self._limited = limited is not None
        self._held_back = None
        jobs: list[ClaimedJob] = []
        if limited is not None:
            # Limited work first (it is bounded by its tokens, so it cannot crowd the
            # rest out) and only for slots free now: a rate-limited job claimed ahead
            # would wait in the buffer and start later in a bunch, above the rate.
            free = min(limit, max(0, self.concurrency - self._running() - len(self.buffer)))
            if free:
                # A claim's batch may hold one key's jobs only, and takes that key's
                # tokens; the next claim steps over the emptied bucket to the other keys.
                for _ in range(LIMITED_ROUNDS):
                    got = self._claim_limited(conn, limited, free - len(jobs))
                    jobs += got
                    if not got or len(jobs) >= free:
                        break
                if len(jobs) < free and limited_waiting(conn, limited):
                    self._held_back = limited
            elif limited_waiting(conn, limited):
                self._held_back = limited
            limit -= len(jobs)
        # Everything else: the one statement of an unlimited claim, without the limited
        # and fair types and limited queues when there are any.
        types = c.plain_types if limited is None else [t for t in c.plain_types
                                                       if t not in limited.types]
        # Beside fair types the plain claim walks past their pending jobs (they are in
        # the claim index too): one that found no plain work while fair work filled its
        # half is not made again for a poll interval (the rest), so a fair backlog is not
        # read through at every claim. A notification for the lane ends the rest once
        # it lasted PLAIN_REST_FACTOR times that empty claim; so does a fair claim that
        # no longer fills the batch.
        now = time.monotonic()
        plain = bool(types) and (not c.fair_types or now >= self._plain_idle_until or (
            self._plain_noted and now >= self._plain_noted_after))
        fair_part = 0
        if c.fair_types and limit > 0:
            # Fair-keyed work: each key in turn (claim_fair_jobs). Limited types and
            # queues are the limited claim's: a type both limited and fair is claimed
            # there, within its limits but not in turns. Beside plain work, half the
            # batch, so neither kind's backlog holds the other behind it.
            fair_part = limit - limit // 2 if plain else limit
            fair = self._claim_fair(conn, fair_part, limited)
            jobs += fair
            limit -= len(fair)
            # Fewer fair jobs are runnable than the batch: little to walk past.
            plain = plain or (bool(types) and len(fair) < fair_part)
            fair_part = fair_part if len(fair) == fair_part else 0  # more may wait
        before = len(jobs)
        started = time.monotonic()
        if plain and limit > 0:
            self._plain_noted = False  # this claim finds what was notified so far
        prepared = self._claim_jobs
        if limit > 0 and limited is None and prepared is not None \
                and prepared.prepared_on(conn) and plain:
            # The common case, and the one an idle worker's job start waits for.
            jobs += prepared.records(conn, ClaimedJob, limit=limit)
        elif limit > 0 and plain:
            skip = c.skip_queues if limited is None or not limited.queues else sorted(
                set(c.skip_queues or []) | set(limited.queues))
            keep = [i for i, t in enumerate(c.types) if t in types]
            jobs += claim(conn, types=types, leases=[c.leases[i] for i in keep],
                          limits=_pick(c.limits, keep), type_queues=_pick(c.type_queues, keep),
                          type_max_attempts=_pick(c.type_max_attempts, keep),
                          queues=c.queues, skip_queues=skip, limit=limit,
                          worker_id=c.worker_id)
        if c.fair_types and plain and limit > 0:
            if fair_part and len(jobs) - before < limit:
                # Only while fair work fills its half: with few fair jobs pending there
                # is little to walk past, and plain jobs start as soon as ever.
                now = time.monotonic()
                self._plain_idle_until = now + self.settings.poll_interval
                self._plain_noted_after = min(self._plain_idle_until,
                                              now + PLAIN_REST_FACTOR * (now - started))
            limit -= len(jobs) - before
            if fair_part and limit > 0:
                # The plain work left room in the batch: the fair work that filled its
                # half may fill the rest.
                jobs += self._claim_fair(conn, limit, limited)
        for job in jobs:
            job.granted_at = sent
        # A backlog after an idle spell: plan again, once these jobs are handed on
        # (_replan).
        self._conn.handled(len(jobs))
        return jobs

    def _claim_fair(self, conn: psycopg.Connection, limit: int,
                    limited: LimitedClaim | None) -> list[ClaimedJob]:
        jobs, self._fair_after = fair_rounds(conn, self.claims, limit, self._fair_after,
                                             limited, self._claim_fair_jobs)
        return jobs

    def _claim_limited(self, conn: psycopg.Connection, limited: LimitedClaim,
                       limit: int) -> list[ClaimedJob]:
        return claim_limited(conn, self.claims, limited, limit)


def claim_limited(conn: psycopg.Connection, c: ClaimSpec, limited: LimitedClaim,
                  limit: int) -> list[ClaimedJob]:
    """A lane's limited claim, one transaction: the scopes' locks, then the claim within
    their tokens and caps (a job type of a limited queue is claimed here whatever its own
    limits). None claimed when the locks (or a row the claim writes) stay held by another
    claim past LOCK_WAIT_SECONDS: the caller claims its other work and tries again."""
    try:
        with conn.transaction():
            lock_scopes(conn, limited.scopes)
            return claim(conn, types=c.types, leases=c.leases, limits=c.limits,
                         type_queues=c.type_queues, type_max_attempts=c.type_max_attempts,
                         queues=c.queues, skip_queues=c.skip_queues, limit=limit,
                         worker_id=c.worker_id, limited=limited)
    except psycopg.errors.LockNotAvailable:
        # A LockNotAvailable is an OperationalError: let it not read as an outage.
        log.debug("limited claim waited too long for its scopes' locks; trying later")
        return []
    except psycopg.errors.IdleInTransactionSessionTimeout as exc:
        # This worker froze inside the transaction and the server ended its session: a
        # lost connection (the claim loop reconnects), not an error that ends the lane.
        raise psycopg.OperationalError(f"limited claim's session ended: {exc}") from exc


def _pick(values: list[Any] | None, keep: list[int]) -> list[Any] | None:
    return None if values is None else [values[i] for i in keep]
