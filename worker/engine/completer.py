"""The completer: writes outcomes in batches, each row still a compare-and-set.

A handler's return frees its slot at once; its outcome waits here until the next flush,
which comes `interval` seconds after the first outcome of a batch arrived or as soon as
`batch_size` outcomes are waiting, whichever is first. One statement (finish_executions)
then moves every job of the batch out of `running` and closes its `job_executions` row,
each only where `(status = 'running', execution_id)` still matches: an execution that
was recovered, cancelled or re-claimed meanwhile has its outcome refused, row by row.

Outcomes waiting here are not durable. If the process dies before a flush, those jobs
are still `running` under leases nobody renews, and recovery moves them on as lost
executions (`worker_lost`), exactly as if the process had died inside the handlers. The
heartbeat renews the leases of waiting outcomes, so a slow flush never loses one.

A flush that fails on a database error is retried with backoff for max(3 × lease, 10 s);
past that, recovery will have taken the jobs over and the write is moot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any
from uuid import UUID

import psycopg

from jobwarden.worker.core.dberrors import DB_UNREACHABLE, Backoff
from jobwarden.worker.core.errors import OUTCOME_UNSTORABLE
from jobwarden.worker.core.logs import execution_event
from jobwarden.worker.core.sanitize import sanitize_error_code, sanitize_text
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.core.storable import storable_text
from jobwarden.worker.core.transitions import TRANSITIONS
from jobwarden.worker.engine.producer import ClaimedJob
from jobwarden.worker.store.arrays import (
    bool_array,
    float_array,
    int_array,
    uuid_array,
    word,
    word_array,
)
from jobwarden.worker.store.db import DedicatedConnection
from jobwarden.worker.store.event_totals import ZOMBIE_OUTCOME, count
from jobwarden.worker.store.jobstore import AsyncJobStore, JobStore
from jobwarden.worker.store.queries import CallerConnection, Q

log = logging.getLogger("jobwarden.completer")

#: How PostgreSQL (or psycopg, before sending) refuses a value, as opposed to being away.
STORE_REFUSED = (psycopg.DataError, psycopg.IntegrityError, psycopg.ProgrammingError,
                 UnicodeError, ValueError)


@dataclass(slots=True, eq=False, kw_only=True)
class Completion:
    """One execution's outcome, waiting to be written. Built by keyword: its ids,
    attempt and lease are all numbers, and a swap would write the wrong row."""

    job_id: int
    execution_id: UUID
    type: str
    attempt: int
    lease: float
    status: JobStatus
    outcome: ExecutionOutcome
    error_code: str | None = None
    error: str | None = None
    delay: float = 0.0
    progress: str | None = None  # JSON text, as ExecutionControl.take_pending() gives it
    checkpoint: str | None = None
    traceback: str | None = None  # the handler's, already sanitized and capped
    queue: str = ""
    duration_ms: float | None = None  # how long the handler ran (None: it never started)
    #: Recovery's guard: written only while the job's lease is still ended (the worker
    #: may have renewed it between the lock and the write).
    lapsed_only: bool = False
    #: The job's concurrency key (None: none, or not known): once this is written, the
    #: key's next job may start (Completer's `on_keys_freed`).
    concurrency_key: str | None = None
    #: What the handler returned, as JSON text (a completion only; None: nothing).
    result: str | None = None
    #: The batch the job is a member of (None: none, or not known): its outcome is counted
    #: there in the same transaction (write_batch opens one on an autocommit connection).
    batch_id: int | None = None
    #: Members the handler added to that batch in the business transaction this outcome
    #: commits with (ctx.add_to_batch): counted into the batch before the outcome is.
    batch_added: int = 0
    #: The attempt's log lines as JSON text (None: it logged nothing), and how many were
    #: dropped past the cap (attempt_log.py): written with the outcome, in its transaction.
    log_lines: str | None = None
    log_dropped: int = 0

    def __post_init__(self) -> None:
        # Every outcome reaches the database and the log through a Completion: redact and
        # cap what the handler raised here, once, for both (a completion has neither).
        if self.error_code is not None:
            self.error_code = storable_text(sanitize_error_code(self.error_code))
        if self.error is not None:
            self.error = sanitize_text(self.error)

    def row(self) -> dict[str, Any]:
        """The outcome as one row of finish_executions (see finish_params)."""
        return {"job_id": self.job_id, "execution_id": self.execution_id,
                "status": self.status.value, "outcome": self.outcome.value,
                "error_code": self.error_code, "error": self.error,
                "delay": self.delay, "progress": self.progress,
                "checkpoint": self.checkpoint, "traceback": self.traceback,
                "lapsed_only": self.lapsed_only, "result": self.result}

    def event(self, action: str) -> dict[str, Any]:
        """The `extra` of a log line about this outcome (worker/core/logs.py)."""
        return execution_event(action, job_id=self.job_id, job_type=self.type,
                               queue=self.queue, execution_id=self.execution_id,
                               attempt=self.attempt, duration_ms=self.duration_ms,
                               error_code=self.error_code)


#: Whether an attempt that ended so stays spent, by outcome (the transitions table's word).
_SPENT = {o.value: t.attempt_spent for o, t in TRANSITIONS.items()}


#: A Completion's job id (the sort key of a batch) and lease, read in C.
_job_id = attrgetter("job_id")
_lease = attrgetter("lease")


def finish_params(rows: list[dict[str, Any]]) -> dict[str, list[Any] | None]:
    """finish_executions' parameters: the rows as parallel arrays, sorted by job id (so
    concurrent batches lock rows in one order). progress and checkpoint are JSON text.
    Whether each attempt stays spent is the transitions table's word on its outcome;
    `pending_ids`: the rows sent back to pending (the statement reads their available_at
    before it rewrites it). For rows as dicts (Completion.row); the worker's own write
    paths take `completion_params`, the same arrays read straight off Completions."""
    rows = sorted(rows, key=lambda r: r["job_id"])
    spent = {o: t.attempt_spent for o, t in TRANSITIONS.items()}
    return {"job_ids": [r["job_id"] for r in rows],
            "execution_ids": [r["execution_id"] for r in rows],
            "statuses": [r["status"] for r in rows], "outcomes": [r["outcome"] for r in rows],
            "error_codes": [r["error_code"] for r in rows], "errors": [r["error"] for r in rows],
            "delays": [r["delay"] for r in rows], "progress": [r["progress"] for r in rows],
            "checkpoints": [r["checkpoint"] for r in rows],
            "tracebacks": [r.get("traceback") for r in rows],
            "attempts_spent": [spent[ExecutionOutcome(r["outcome"])] for r in rows],
            "lapsed_only": [r.get("lapsed_only", False) for r in rows],
            # Most jobs return nothing: one NULL then, which unnest pads to every row.
            "results": ([r.get("result") for r in rows]
                        if any(r.get("result") is not None for r in rows) else None),
            "pending_ids": [r["job_id"] for r in rows if r["status"] == JobStatus.PENDING]}


def completion_params(batch: list[Completion]) -> dict[str, Any]:
    """finish_params of the Completions' rows, read straight off them, one array at a
    time: a dict per row, and an enum built per outcome to look up whether its attempt
    stays spent, cost the no-op drain about 1 µs a job. The arrays that never need
    quoting (ids, words, numbers, flags) go as array text joined in C
    (worker/store/arrays.py: psycopg's element-by-element dumping cost ~5 µs a job);
    an array of free text with no value in it goes as one NULL, which unnest pads to
    every row (most outcomes have no error, progress, checkpoint or result)."""
    batch = sorted(batch, key=_job_id)
    outcomes = [c.outcome._value_ for c in batch]
    return {"job_ids": int_array([c.job_id for c in batch]),
            "execution_ids": uuid_array([c.execution_id for c in batch]),
            "statuses": word_array([c.status._value_ for c in batch]),
            "outcomes": word_array(outcomes),
            "error_codes": _texts([c.error_code for c in batch]),
            "errors": _texts([c.error for c in batch]),
            "delays": float_array([c.delay for c in batch]),
            "progress": _texts([c.progress for c in batch]),
            "checkpoints": _texts([c.checkpoint for c in batch]),
            "tracebacks": _texts([c.traceback for c in batch]),
            "attempts_spent": bool_array([_SPENT[o] for o in outcomes]),
            "lapsed_only": bool_array([c.lapsed_only for c in batch]),
            "results": _texts([c.result for c in batch]),
            "pending_ids": int_array([c.job_id for c in batch
                                      if c.status is JobStatus.PENDING])}


def _texts(values: list[str | None]) -> list[str | None] | None:
    """A text array for psycopg to quote, or None (one NULL) when it holds no value."""
    return None if values.count(None) == len(values) else values


# Statuses and outcomes are joined unquoted (word_array): each must be a plain word.
for _member in (*JobStatus, *ExecutionOutcome):
    word(_member.value)


def write_batch(conn: CallerConnection, batch: list[Completion]) -> dict[UUID, str]:
    """Run finish_executions for `batch` on `conn`; returns {execution_id: new status}
    for the executions that still owned their jobs (the others were refused). The one
    store path out of `running`: the completer, a completion in the handler's
    transaction, the hand-back at shutdown and recovery all write through it. Members
    of a batch are counted there in the same transaction: on an autocommit connection
    (the completer's) a batch holding one is written in a transaction of its own; the
    others, all but a batch's members, as one autocommitted statement, as ever."""
    if _needs_transaction(conn, batch):
        with conn.transaction():
            return _write(JobStore(conn), batch)
    return _write(JobStore(conn), batch)


def _write(store: JobStore, batch: list[Completion]) -> dict[UUID, str]:
    rows = store.rows(Q.finish_executions, completion_params(batch))
    owned, in_flows = _read(rows)
    if in_flows:
        if parents := _parents(rows):
            store.rows(Q.release_dependents, {"parent_ids": parents, "as_completed": False})
        for params in _grown(batch, rows):
            store.rows(Q.batch_grow, params)
        if members := _members(rows):
            count_batches(store, members)
    if (logs := log_params(batch, owned)) is not None:
        store.rows(Q.insert_execution_logs, logs)
    return owned


def log_params(batch: list[Completion], owned: dict[UUID, str]) -> dict[str, list[Any]] | None:
    """insert_execution_logs' parameters for the executions of `batch` that logged and
    whose outcome was written (`owned`); None: none did. A refused outcome's lines go
    with it: its execution was recorded by whoever took the job over."""
    logged = [c for c in batch if c.log_lines is not None and c.execution_id in owned]
    if not logged:
        return None
    return {"execution_ids": [c.execution_id for c in logged],
            "job_ids": [c.job_id for c in logged],
            "lines": [c.log_lines for c in logged],
            "dropped": [c.log_dropped for c in logged]}


async def write_batch_async(conn: psycopg.AsyncConnection,
                            batch: list[Completion]) -> dict[UUID, str]:
    """write_batch on a coroutine handler's AsyncConnection (its business transaction):
    the same statements and parameters."""
    store = AsyncJobStore(conn)
    rows = await store.rows(Q.finish_executions, completion_params(batch))
    owned, in_flows = _read(rows)
    if in_flows:
        if parents := _parents(rows):
            await store.rows(Q.release_dependents,
                             {"parent_ids": parents, "as_completed": False})
        for params in _grown(batch, rows):
            await store.rows(Q.batch_grow, params)
        if members := _members(rows):
            log_callbacks(await store.rows(Q.batch_count,
                                           {"job_ids": members, "close_ids": None}))
    if (logs := log_params(batch, owned)) is not None:
        await store.rows(Q.insert_execution_logs, logs)
    return owned


def _needs_transaction(conn: CallerConnection, batch: list[Completion]) -> bool:
    """Whether `conn` commits each statement on its own and `batch` holds a member of a
    batch (whose count must commit with its outcome) or an attempt's log lines (kept
    with their outcome or not at all)."""
    if not (isinstance(conn, psycopg.Connection) and conn.autocommit
            and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE):
        return False
    for c in batch:  # a loop, not any() over a generator: a third of the time a job
        if c.batch_id is not None or c.log_lines is not None:
            return True
    return False


def _read(rows: list[tuple[Any, ...]]) -> tuple[dict[UUID, str], bool]:
    """finish_executions' rows as {execution_id: new status} for the executions that
    still owned their jobs, and whether the finish touched a job with edges its snapshot
    missed or a batch's member (the two last columns): then the readings below follow.
    Columns, not rows: transposed and read in C, with no Python step per job (the three
    readings below, made for every batch, cost the no-op drain about 1 µs a job)."""
    if not rows:
        return {}, False
    _, execution_ids, statuses, has_dependents, batch_ids = zip(*rows, strict=True)
    return (dict(zip(execution_ids, statuses, strict=True)),
            any(has_dependents) or batch_ids.count(None) != len(batch_ids))


def _grown(batch: list[Completion], rows: list[tuple[Any, ...]]) -> list[dict[str, int]]:
    """batch_grow's parameters for the members that executions whose outcomes were written
    added in their business transactions: counted after the finish (which locked their
    own rows) and before the count (which could otherwise find their batch complete)."""
    owned = {execution_id for _job_id, execution_id, *_ in rows}
    return [{"batch_id": c.batch_id, "members": c.batch_added} for c in batch
            if c.batch_added and c.batch_id is not None and c.execution_id in owned]


def _members(rows: list[tuple[Any, ...]]) -> list[int]:
    """The jobs of a finish that are members of a batch (none for ordinary jobs)."""
    return [job_id for job_id, _execution_id, _status, _, batch_id in rows
            if batch_id is not None]


def count_batches(store: JobStore, job_ids: list[int]) -> None:
    """Count these members' outcomes into their batches, enqueueing the callbacks that
    came due (batch_count)."""
    log_callbacks(store.rows(Q.batch_count, {"job_ids": job_ids, "close_ids": None}))


def log_callbacks(rows: list[tuple[Any, ...]]) -> None:
    """One line per callback batch_count enqueued: (batch id, event, job id)."""
    for batch_id, event, job_id in rows:
        log.info("batch %s: %s callback enqueued as job %s", batch_id, event, job_id,
                 extra={"action": "batch_callback", "batch_id": batch_id, "job_id": job_id})


def _parents(rows: list[tuple[Any, ...]]) -> list[int]:
    """The jobs of a finish with edges its snapshot could not see. finish_executions
    released the edges it saw; release_dependents, a statement of its own (so in a newer
    snapshot), releases those an enqueue committed while the finish waited for the
    parent's row lock. Idempotent: an edge is released once. Ordinary jobs, and parents
    whose edges were all there to see, never get here: a statement (and a commit) per
    batch of a fan-in cost it twice the time of as many independent jobs."""
    return [job_id for job_id, _execution_id, _status, has_dependents, _ in rows
            if has_dependents]


def hand_back(conn: CallerConnection,
              items: list[tuple[ClaimedJob, str | None, str | None]]) -> set[int]:
    """Graceful shutdown: unfinished (or never started) jobs back to pending now, without
    spending an attempt (or ended cancelled if that was requested: it would stop at once
    on its next run), each only if its execution still owns it; the workers of their
    queues woken in the same transaction. `items`: (job, progress, checkpoint), the last
    two as JSON text or None. Returns the ids of the jobs moved."""
    batch = [Completion(job_id=job.id, execution_id=job.execution_id, type=job.type,
                        attempt=job.attempt, lease=0.0, status=JobStatus.PENDING,
                        outcome=ExecutionOutcome.HANDED_BACK, progress=progress,
                        checkpoint=checkpoint, queue=job.queue)
             for job, progress, checkpoint in items]
    with conn.transaction():
        moved = write_batch(conn, batch)
        queues = [c.queue for c in batch if moved.get(c.execution_id) == JobStatus.PENDING]
        if queues:
            JobStore(conn).rows(Q.notify_queues, {"queues": queues})
    return {c.job_id for c in batch if c.execution_id in moved}


def unstorable(c: Completion, exc: BaseException) -> Completion:
    """The failure recorded in place of an outcome PostgreSQL refused to store."""
    return Completion(job_id=c.job_id, execution_id=c.execution_id, type=c.type,
                      attempt=c.attempt, lease=c.lease, status=JobStatus.FAILED,
                      outcome=ExecutionOutcome.FAILED, error_code=OUTCOME_UNSTORABLE,
                      error=f"the {c.outcome.value} outcome ({c.error_code or 'no code'}) "
                            f"could not be stored: PostgreSQL refused it "
                            f"({type(exc).__name__})",
                      queue=c.queue, duration_ms=c.duration_ms, batch_id=c.batch_id)


def write_storable(conn: CallerConnection, batch: list[Completion]) -> dict[UUID, str]:
    """write_batch on an autocommit connection, never losing an outcome to a value
    PostgreSQL refuses: a refused batch is written outcome by outcome, and an outcome
    refused on its own is replaced by its OUTCOME_UNSTORABLE failure. Without this the
    job would sit in `running` for a whole lease and end as a lost worker."""
    try:
        return write_batch(conn, batch)
    except STORE_REFUSED as exc:
        if len(batch) > 1:
            owned: dict[UUID, str] = {}
            for c in batch:
                owned.update(write_storable(conn, [c]))
            return owned
        (c,) = batch
        log.error("job %s: the %s outcome could not be stored (%s); recording %s instead",
                  c.job_id, c.outcome.value, type(exc).__name__, OUTCOME_UNSTORABLE,
                  extra={"action": "outcome_unstorable", "job_id": c.job_id})
        return write_batch(conn, [unstorable(c, exc)])


class Completer:
    """Buffers outcomes and flushes them in batches from its own thread (see run())."""

    def __init__(self, conn: DedicatedConnection | list[DedicatedConnection], *,
                 batch_size: int = 100, interval: float = 0.002,
                 give_up: threading.Event | None = None,
                 on_keys_freed: Callable[[], None] | None = None) -> None:
        #: One connection per writer thread (run(writer) for each). With two, one batch is
        #: written while the next is gathered and sent: a single writer is busy all the
        #: time in a drain, half of it waiting for the server (docs/architecture.md §6).
        self._conns = conn if isinstance(conn, list) else [conn]
        self.batch_size = batch_size
        self.interval = interval
        self._give_up = give_up or threading.Event()
        self._queue: list[Completion] = []
        self._first_at = 0.0  # when the oldest waiting outcome arrived
        self._in_flight: dict[int, list[Completion]] = {}  # by writer
        # A plain lock, which submit() takes directly: a Condition's own `with` is two
        # Python calls more per job, and nothing under it re-enters.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        # One batch at a time per writer. Batches of different writers hold different
        # executions (an execution has one outcome, and its job's next one cannot start
        # before it is written), so their order does not matter.
        self._write_locks = [threading.Lock() for _ in self._conns]
        self._closing = False
        #: Told once a written batch ended executions that held a concurrency key: only
        #: now does the claim see their keys' room (the worker wakes its producers).
        self._on_keys_freed = on_keys_freed
        self.written = 0
        self.refused = 0

    @property
    def writers(self) -> int:
        """How many writer threads this completer wants (one run() each)."""
        return len(self._conns)

    def submit(self, completion: Completion) -> None:
        with self._lock:
            queue = self._queue
            if not queue:
                self._first_at = time.monotonic()
            queue.append(completion)
            if len(queue) == 1 or len(queue) >= self.batch_size:
                self._cond.notify()

    def pending(self) -> list[Completion]:
        """Outcomes submitted and not yet written (for the heartbeat to keep alive)."""
        with self._cond:
            return [c for batch in self._in_flight.values() for c in batch] + self._queue

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue) + sum(map(len, self._in_flight.values()))

    def run(self, writer: int = 0) -> None:
        """A flushing thread (one per writer): until close(), write each batch when it is
        full or its first outcome has waited `interval` seconds."""
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return  # closing, and nothing left
                while (len(self._queue) < self.batch_size and not self._closing
                       and (left := self._first_at + self.interval - time.monotonic()) > 0):
                    self._cond.wait(left)
            self.flush(limit=self.batch_size, writer=writer)

    def close(self) -> None:
        """Flush what is waiting and let run() return."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def flush(self, limit: int | None = None, writer: int = 0) -> None:
        """Write waiting outcomes now, in the caller's thread (all of them by default), on
        `writer`'s connection."""
        with self._write_locks[writer]:
            while True:
                with self._cond:
                    n = len(self._queue) if limit is None else min(limit, len(self._queue))
                    if n == 0:
                        return
                    batch, self._queue = self._queue[:n], self._queue[n:]
                    self._first_at = time.monotonic()
                    self._in_flight[writer] = batch
                try:
                    self._write_with_retry(batch, self._conns[writer])
                finally:
                    with self._cond:
                        del self._in_flight[writer]
                if limit is not None:
                    return

    def _write_with_retry(self, batch: list[Completion], conn: DedicatedConnection) -> None:
        give_up = time.monotonic() + max(3 * max(map(_lease, batch)), 10.0)
        backoff = Backoff(first=0.2, cap=5.0)
        while True:
            try:
                owned = write_storable(conn.get(), batch)
                break
            except DB_UNREACHABLE as exc:
                conn.drop()
                if time.monotonic() > give_up or self._give_up.is_set():
                    log.error("could not record %d outcome(s) (%s); recovery will take "
                              "over their jobs", len(batch), exc,
                              extra={"action": "record_failed", "count": len(batch)})
                    return
                wait = backoff.next()
                log.warning("recording %d outcome(s) failed (%s); retrying in %.1fs",
                            len(batch), exc, wait, extra={"action": "db_unavailable"})
                self._give_up.wait(wait)
        conn.handled(len(batch))  # a backlog after an idle spell: plan again (below)
        self.written += len(owned)
        if self._on_keys_freed is not None and _frees_keys(batch, owned):
            self._on_keys_freed()
        # Each outcome has its own execution: all were written when as many were owned
        # (and then no execution id is hashed again: a UUID's hash is a Python call).
        refused = ([] if len(owned) == len(batch)
                   else [c for c in batch if c.execution_id not in owned])
        recorded: dict[UUID, str] = {}
        if refused:
            self.refused += len(refused)
            try:
                recorded = count_refused(conn.get(), refused)
            except DB_UNREACHABLE:
                conn.drop()
        log_outcomes(batch, owned, recorded)
        conn.replan()


def _frees_keys(batch: list[Completion], owned: dict[UUID, str]) -> bool:
    """Whether a written outcome of `batch` ended an execution that held a concurrency
    key (a loop, not any() over a generator: most outcomes hold none)."""
    for c in batch:
        if c.concurrency_key is not None and c.execution_id in owned:
            return True
    return False


def count_refused(conn: CallerConnection, refused: list[Completion]) -> dict[UUID, str]:
    """Count outcomes the guard refused (zombie executions, for /metrics) and read how
    each of their executions was recorded instead (worker_lost, or an earlier write)."""
    count(conn, ZOMBIE_OUTCOME, [c.type for c in refused])
    return dict(JobStore(conn).rows(Q.execution_outcomes, {
        "job_ids": [c.job_id for c in refused],
        "execution_ids": [c.execution_id for c in refused]}))


def log_outcomes(batch: list[Completion], owned: dict[UUID, str],
                 recorded: dict[UUID, str]) -> None:
    """One line per outcome: written (with the status it gave its job), or discarded
    because its execution no longer owned the job (with how that execution was recorded).
    Every writer of outcomes — this thread's batches, a handler's own transaction —
    says it the same way."""
    if (len(owned) == len(batch) and not log.isEnabledFor(logging.DEBUG)
            and list(owned.values()).count(JobStatus.COMPLETED) == len(owned)):
        return  # every outcome written, each a completion: their lines are DEBUG's
    for c in batch:
        if (status := owned.get(c.execution_id)) is not None:
            log_written(c, status)
        else:
            log.warning("job %s: execution %s no longer owns the job (recorded as %s); its "
                        "%s result is discarded", c.job_id, c.execution_id,
                        recorded.get(c.execution_id) or "unfinished", c.outcome.value,
                        extra=c.event("result_discarded"))


def log_written(c: Completion, status: str) -> None:
    """One line per outcome written; completions only at DEBUG (thousands a second)."""
    level = logging.DEBUG if status == JobStatus.COMPLETED else logging.INFO
    if not log.isEnabledFor(level):
        return
    log.log(level, "job %s %s -> %s%s", c.job_id, c.type, status,
             f" ({c.error_code})" if c.error_code else "",
             extra=c.event("job_" + c.outcome.value))
