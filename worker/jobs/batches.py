"""Batches: a set of jobs with callbacks when it completes, succeeds or first fails.

    with open_batch(conn, description="import 42", owner="import:42",
                    on_complete=JobSpec("import.mail_owner", {"to": "ana@example.com"})) as b:
        b.enqueue_many([JobSpec("import.row", {"row": n}) for n in range(10_000)])
    conn.commit()

The batch is opened in the caller's transaction and closed when the block ends without
an exception (its opener is done adding: callbacks wait for that, so a block that
commits chunk by chunk never sees them early, and an empty batch completes there).
Members join later through `enqueue_many(conn, jobs, batch=id)` or, from a running
member, `ctx.add_to_batch(jobs)`, until the batch has completed. Each callback is a
job enqueued once, the first time its condition holds, with the batch's counts in its
payload under `batch` (docs/guide/flows.md#batches; the statements are in
worker/store/sql/batches.sql).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from jobwarden.worker.core.errors import EnqueueError
from jobwarden.worker.jobs.enqueue import (
    _columns,
    _enqueue_steps,
    _specs,
    max_payload_bytes,
)
from jobwarden.worker.jobs.job_spec import JobSpec
from jobwarden.worker.jobs.job_types import with_published_policies_steps
from jobwarden.worker.jobs.registry import Registry, registry
from jobwarden.worker.store.jobstore import (
    AsyncJobStore,
    JobStore,
    Steps,
    run_steps,
    run_steps_async,
)
from jobwarden.worker.store.queries import CallerConnection, Q

#: Longest description and owner key: a batch's label, not its data.
MAX_LABEL_CHARS = 500
#: The payload key a callback finds the batch's id, event, owner and counts under.
BATCH_KEY = "batch"

Jobs = Iterable[JobSpec | Mapping[str, Any]]


@dataclass(frozen=True)
class BatchState:
    """A batch as it stands: its counts by final state, and when each callback came due
    (`callbacks`: event -> the job it became, None until then)."""

    id: int
    description: str
    owner: str | None
    created_at: datetime
    members: int
    completed: int
    failed: int
    cancelled: int
    skipped: int
    unknown: int
    closed_at: datetime | None
    failure_at: datetime | None
    complete_at: datetime | None
    success_at: datetime | None
    callbacks: dict[str, int | None]

    @property
    def unfinished(self) -> int:
        """Members not in a final state (pending, waiting, running; unknown ones apart)."""
        return (self.members - self.completed - self.failed - self.cancelled
                - self.skipped - self.unknown)


class Batch:
    """An open batch in its opener's transaction (open_batch): `id`, and enqueue into it."""

    def __init__(self, conn: CallerConnection, batch_id: int, registry: Registry) -> None:
        self._conn = conn
        self.id = batch_id
        self._registry = registry

    def enqueue(self, type: str, payload: Mapping[str, Any], **options: Any) -> int:
        """Enqueue one member (enqueue's keywords); returns its id."""
        return self.enqueue_many([JobSpec(type=type, payload=payload, **options)])[0]

    def enqueue_many(self, jobs: Jobs) -> list[int]:
        """Enqueue members in one statement; returns their ids in the order given."""
        return run_steps(JobStore(self._conn),
                         _enqueue_steps(_specs(jobs), self._registry, self.id))


class AsyncBatch:
    """Batch for async code (open_batch_async): the same calls, awaited."""

    def __init__(self, conn: Any, batch_id: int, registry: Registry) -> None:
        self._conn = conn
        self.id = batch_id
        self._registry = registry

    async def enqueue(self, type: str, payload: Mapping[str, Any], **options: Any) -> int:
        return (await self.enqueue_many([JobSpec(type=type, payload=payload, **options)]))[0]

    async def enqueue_many(self, jobs: Jobs) -> list[int]:
        return await run_steps_async(AsyncJobStore(self._conn),
                                     _enqueue_steps(_specs(jobs), self._registry, self.id))


@contextmanager
def open_batch(conn: CallerConnection, *, description: str, owner: str | None = None,
               on_complete: JobSpec | None = None, on_success: JobSpec | None = None,
               on_failure: JobSpec | None = None,
               registry: Registry = registry) -> Iterator[Batch]:
    """Open a batch in the caller's transaction (psycopg, or SQLAlchemy Connection or
    Session) and yield it; closed when the block ends without an exception (not on
    one: the caller's transaction is rolling back). The caller commits.

    `on_complete`: a job enqueued once every member has reached a final state
    (completed, failed, cancelled, skipped); `on_success`: once every member completed;
    `on_failure`: at the first member that failed for good. Each is enqueued once, with
    the batch's id, event, owner and counts in its payload under "batch". `owner`: a key
    to find the batch by (find_batches), e.g. the import's id."""
    steps = _open_steps(description, owner, on_complete, on_success, on_failure, registry)
    opened = Batch(conn, run_steps(JobStore(conn), steps), registry)
    yield opened
    JobStore(conn).rows(Q.batch_count, {"job_ids": None, "close_ids": [opened.id]})


@asynccontextmanager
async def open_batch_async(conn: Any, *, description: str, owner: str | None = None,
                           on_complete: JobSpec | None = None,
                           on_success: JobSpec | None = None,
                           on_failure: JobSpec | None = None,
                           registry: Registry = registry) -> AsyncIterator[AsyncBatch]:
    """open_batch for async code: `conn` is a psycopg AsyncConnection or a SQLAlchemy
    AsyncConnection or AsyncSession; `async with open_batch_async(...) as b: await
    b.enqueue_many(...)`."""
    store = AsyncJobStore(conn)
    steps = _open_steps(description, owner, on_complete, on_success, on_failure, registry)
    opened = AsyncBatch(conn, await run_steps_async(store, steps), registry)
    yield opened
    await store.rows(Q.batch_count, {"job_ids": None, "close_ids": [opened.id]})


def _open_steps(description: str, owner: str | None, on_complete: JobSpec | None,
                on_success: JobSpec | None, on_failure: JobSpec | None,
                local: Registry) -> Steps[int]:
    """batch_open's statement: everything checked before it (EnqueueError, nothing
    written), each callback resolved as enqueue resolves a job (its type's queue and
    attempts from this registry, else from the published policies)."""
    _label("description", description, required=True)
    _label("owner", owner, required=False)
    callbacks = {event: spec for event, spec in (("complete", on_complete),
                                                 ("success", on_success),
                                                 ("failure", on_failure)) if spec is not None}
    for event, spec in callbacks.items():
        _check_callback(event, spec)
    params: dict[str, Any] = {"description": description, "owner": owner, "events": None,
                              "queues": None, "types": None, "versions": None,
                              "payloads": None, "priorities": None, "max_attempts": None,
                              "concurrency_keys": None, "policy_defaults": None}
    if callbacks:
        specs = list(callbacks.values())
        known = yield from with_published_policies_steps({s.type for s in specs}, local)
        cols = _columns(specs, known, max_payload_bytes())
        params.update({name: cols[name] for name in (
            "queues", "types", "versions", "priorities", "max_attempts", "concurrency_keys",
            "policy_defaults")})
        params["payloads"] = "[" + ",".join(cols["payloads"]) + "]"
        params["events"] = list(callbacks)
    _, rows = yield Q.batch_open, params
    batch_id: int = rows[0][0]
    return batch_id


def _label(field: str, value: object, *, required: bool) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise EnqueueError(f"{field} must be a non-empty string", field)
    if len(value) > MAX_LABEL_CHARS:
        raise EnqueueError(f"{field} is {len(value)} characters, over the limit of "
                           f"{MAX_LABEL_CHARS}", field)
    if "\x00" in value:
        raise EnqueueError(f"{field} contains a NUL character, which PostgreSQL cannot store",
                           field)


def _check_callback(event: str, spec: object) -> None:
    """Raise EnqueueError for a callback that cannot be enqueued as the batch will."""
    field = f"on_{event}"
    if not isinstance(spec, JobSpec):
        raise EnqueueError(f"{field} must be a JobSpec, not {type(spec).__name__}", field)
    spec.validate()
    refused = [name for name, value in (("after", spec.after), ("run_at", spec.run_at),
                                         ("delay", spec.delay),
                                         ("idempotency_key", spec.idempotency_key),
                                         ("unique_key", spec.unique_key),
                                         ("unique_for", spec.unique_for),
                                         ("replace", spec.replace),
                                         ("expires_at", spec.expires_at))
               if value]
    if refused:
        raise EnqueueError(f"{field}: a callback is enqueued when it comes due and takes "
                           f"no {', '.join(refused)}", field)
    if isinstance(spec.payload, Mapping) and BATCH_KEY in spec.payload:
        raise EnqueueError(f"{field}: its payload may not use the key {BATCH_KEY!r}, where "
                           "the batch's counts go", field)


# -- members added by a running member ----------------------------------------------------

def add_steps(jobs: Jobs, batch_id: int | None, job_id: int, local: Registry,
              counted: bool) -> Steps[list[int]]:
    """A running member's fan-out into its own batch. `counted` True: in a transaction
    of its own, counted now (batch_join). False: in its business transaction, inserted
    now and counted as that commits with its outcome (write_batch, batch_grow), so the
    batch's row is not held locked while the handler goes on (every member's count
    would wait for it).
    Its batch cannot complete while it runs: only one that completed before it was
    retried refuses it, and says so here."""
    if batch_id is None:
        raise EnqueueError(f"job {job_id} is not a member of a batch: nothing to add to",
                           "batch")
    specs = _specs(jobs)
    if not counted:
        _, rows = yield Q.batch_is_open, {"batch_id": batch_id}
        if not rows or not rows[0][0]:
            raise EnqueueError(f"batch {batch_id} is complete: it takes no more members "
                               "(its member was retried after it completed)", "batch")
    return (yield from _enqueue_steps(specs, local, batch_id, join=counted))


# -- finding batches ---------------------------------------------------------------------

def get_batch(conn: CallerConnection, batch_id: int) -> BatchState | None:
    """The batch `batch_id` as it stands (None: no such batch)."""
    found = _states(JobStore(conn).rows(Q.batch_get, {"ids": [int(batch_id)], "owner": None}))
    return found[0] if found else None


def find_batches(conn: CallerConnection, owner: str) -> list[BatchState]:
    """The batches opened with this owner key, newest first."""
    return _states(JobStore(conn).rows(Q.batch_get, {"ids": None, "owner": owner}))


def _states(rows: list[tuple[Any, ...]]) -> list[BatchState]:
    names = [f.name for f in fields(BatchState)]
    return [BatchState(**dict(zip(names, (*row[:-1], dict(row[-1])), strict=True)))
            for row in rows]
