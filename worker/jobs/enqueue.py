"""Enqueue jobs inside the caller's own transaction.

The web request commits its business change and the jobs it needs together: if the
transaction rolls back, no job exists; if it commits, every job does. So enqueue never
commits — it writes through whatever connection the caller is using (psycopg 3, or a
SQLAlchemy Connection or Session) and lets the caller's COMMIT decide.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from jobwarden.worker.core import tracing
from jobwarden.worker.core.env import worker_setting
from jobwarden.worker.core.errors import EnqueueError
from jobwarden.worker.core.sanitize import describe_validation, validation_error
from jobwarden.worker.jobs.flows import Parent, resolve
from jobwarden.worker.jobs.job_spec import JobSpec, check_payload
from jobwarden.worker.jobs.job_types import defaulted_fields, with_published_policies_steps
from jobwarden.worker.jobs.registry import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    Registry,
    check_name,
    registry,
)
from jobwarden.worker.jobs.uniqueness import Enqueued, any_unique, terms_of, unique_steps
from jobwarden.worker.store.jobstore import (
    AsyncJobStore,
    JobStore,
    Steps,
    run_steps,
    run_steps_async,
)
from jobwarden.worker.store.queries import Q


def max_payload_bytes() -> int:
    limit: int = worker_setting("max_payload_bytes")
    return limit


#: One encoder for every payload: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def encode_payload(payload: Any, limit: int | None = None, *, checked: bool = False) -> str:
    """The payload as JSON text, or EnqueueError saying exactly what is wrong with it.
    `checked`: check_payload already passed (JobSpec.validate runs it), so skip it."""
    if not checked:
        check_payload(payload)
    try:
        text = _ENCODER.encode(payload)
    except (TypeError, ValueError) as exc:
        raise EnqueueError(f"payload is not JSON-serializable: {exc}", "payload") from exc
    limit = max_payload_bytes() if limit is None else limit
    # A character is at most 4 bytes in UTF-8: short text needs no encoding to measure.
    if len(text) * 4 > limit and (size := len(text.encode())) > limit:
        raise EnqueueError(
            f"payload is {size} bytes, over the {limit}-byte limit: store the data elsewhere "
            "and enqueue its id", "payload")
    return text


def _columns(specs: list[JobSpec], reg: Registry, limit: int) -> dict[str, Any]:
    """enqueue_jobs' parameters: one array per column, each spec's type policy applied,
    payloads as JSON texts (parallel arrays cost the database less per row than JSON rows,
    and skip building and parsing one object per job). Integer and name columns go as
    array literals (see _names_literal)."""
    cols: dict[str, list[Any]] = {name: [] for name in (
        "queues", "types", "versions", "payloads", "priorities", "run_ats", "delays",
        "max_attempts", "idempotency_keys", "concurrency_keys", "policy_defaults",
        "expires_ats", "expires_afters", "unique_keys", "fair_paths")}
    (queues, types, versions, payloads, priorities, run_ats, delays, max_attempts,
     idem_keys, conc_keys, defaults, expires_ats, expires_afters, unique_keys,
     fair_paths) = cols.values()
    for spec in specs:
        job_type = reg.get(spec.type)
        version = spec.version
        if version is None:
            version = job_type.version if job_type else 1
        raw = spec.payload
        if hasattr(raw, "model_dump"):  # a pydantic model instance: store its JSON form
            raw = raw.model_dump(mode="json")
        text = encode_payload(raw, limit, checked=True)
        if job_type is not None and job_type.payload_model is not None \
                and version == job_type.version:
            try:  # validated as the worker will read it back: the JSON form
                job_type.validate_payload(json.loads(text))
            except validation_error() as exc:
                raise EnqueueError(f"payload does not fit {job_type.payload_model.__name__}: "
                                   f"{describe_validation(exc)}", "payload") from None
        queues.append(spec.queue or (job_type.queue if job_type else DEFAULT_QUEUE))
        types.append(spec.type)
        versions.append(version)
        payloads.append(text)
        priorities.append(spec.priority)
        run_ats.append(spec.run_at.isoformat() if spec.run_at else None)
        delays.append(spec.delay)
        max_attempts.append(spec.max_attempts if spec.max_attempts is not None
                            else job_type.max_attempts if job_type else DEFAULT_MAX_ATTEMPTS)
        idem_keys.append(spec.idempotency_key)
        conc_keys.append(spec.concurrency_key)
        # A deadline given wins; else the type's expires_after counts from the run time.
        expires_ats.append(spec.expires_at.isoformat() if spec.expires_at else None)
        expires_afters.append(job_type.expires_after if job_type is not None
                              and spec.expires_at is None else None)
        unique_keys.append(spec.unique_key)
        # The fair key is read from the stored payload in SQL (enqueue_jobs).
        fair_paths.append(job_type.fair_key if job_type is not None else None)
        # The policy fields that took the documented defaults, for the type's first
        # worker to replace (a text[] per row cannot travel in an array of rows: joined).
        # A type with a known policy took none.
        if job_type is None:
            given = {"queue": spec.queue, "max_attempts": spec.max_attempts}
            defaults.append(",".join(defaulted_fields(given, reg, spec.type)) or None)
        else:
            defaults.append(None)
    # A field no job sets travels as one NULL instead of an array of them: ROWS FROM
    # gives every row NULL for a function that returns no rows.
    # The statement's parameters: a column as a list, as one NULL, or as an array literal.
    out: dict[str, Any] = {name: None if col.count(None) == len(col) else col
                           for name, col in cols.items()}
    for name in ("queues", "types"):
        out[name] = _names_literal(cols[name])
    for name in ("versions", "priorities", "max_attempts"):
        out[name] = "{" + ",".join(map(str, cols[name])) + "}"
    return out


def _names_literal(names: list[str]) -> str:
    """Names (job types, queues) as one array literal for a `::text[]` cast. The driver
    adapts a list element by element in Python, a third of the statement's client time
    for a column that is the same name thousands of times; a checked name (letters,
    digits, '_', '.', ':', '-') needs no escaping inside double quotes."""
    for name in set(names):
        check_name("name", name)
    return '{"' + '","'.join(names) + '"}'


def enqueue_many(conn: Any, jobs: Iterable[JobSpec | Mapping[str, Any]],
                 *, batch: int | None = None, registry: Registry = registry) -> list[int]:
    """Enqueue several jobs in one statement; returns their ids in the order given.

    A job whose idempotency key is held by a live (pending or running) job is not
    inserted: its id in the result is the existing job's, an `Enqueued` whose `.folded`
    is True. So is a job folded into the holder of its unique key, and every id of a job
    with a unique key is an `Enqueued` (docs/guide/uniqueness.md); other ids are ints.

    `batch`: the id of a batch they all join (docs/guide/flows.md#batches), which must
    not have completed; its row stays locked until the caller's transaction ends.
    """
    # The caller's connection, in the caller's transaction.
    return run_steps(JobStore(conn), _enqueue_steps(_specs(jobs), registry, batch))


async def enqueue_many_async(conn: Any, jobs: Iterable[JobSpec | Mapping[str, Any]],
                             *, batch: int | None = None,
                             registry: Registry = registry) -> list[int]:
    """enqueue_many for async code: `conn` is a psycopg AsyncConnection or a SQLAlchemy
    AsyncConnection or AsyncSession, in the caller's transaction. The same validation
    and statements (_enqueue_steps)."""
    return await run_steps_async(AsyncJobStore(conn),
                                 _enqueue_steps(_specs(jobs), registry, batch))


def _specs(jobs: Iterable[JobSpec | Mapping[str, Any]]) -> list[JobSpec]:
    specs = [j if isinstance(j, JobSpec) else JobSpec(**j) for j in jobs]
    for spec in specs:
        spec.validate()  # before any statement runs: the caller's transaction stays usable
    return specs


def _enqueue_steps(specs: list[JobSpec], registry: Registry, batch: int | None = None,
                   join: bool = True) -> Steps[list[int]]:
    """enqueue_many's statements and what it makes of their answers, for either kind of
    connection (worker/store/jobstore.py, Steps). `specs` are validated. A call with
    `after` locks its existing parents first (refusing a missing one before anything is
    written), inserts its jobs, then writes their edges (worker/jobs/flows.py). A call
    into a `batch` counts its jobs there before inserting them (batch_join; `join`
    False: the caller counts them itself, worker/jobs/batches.py), refusing a batch that
    is gone or complete before anything is written; after the parents' locks, as a
    finish takes its jobs' rows before their batches'."""
    if batch is not None and specs:
        check_members(specs, batch)
    edges = resolve([s.after for s in specs], [s.key for s in specs])
    outer = sorted({parent for _, parent, _ in edges.outer})
    if outer:
        _, found = yield Q.flow_lock_parents, {"ids": outer}
        missing = sorted(set(outer) - {row[0] for row in found})
        if missing:
            raise EnqueueError(f"after: no job {', '.join(f'#{m}' for m in missing[:10])} "
                               "exists: nothing was enqueued", "after")
    if batch is not None and specs and join:
        _, joined = yield Q.batch_join, {"batch_id": batch, "members": len(specs)}
        if not joined or not joined[0][0]:
            raise EnqueueError(f"batch {batch} {'is complete' if joined else 'does not exist'}"
                               ": it takes no more members; nothing was enqueued", "batch")
    ids = yield from _insert_steps(specs, registry, batch)
    if not edges:
        return ids
    rows = ([(ids[c], ids[p], a) for c, p, a in edges.inner]
            + [(ids[c], p, a) for c, p, a in edges.outer])
    # The call's own parents too: a job whose idempotency key a live job held is that
    # job, which a finish elsewhere may be moving right now.
    inner = sorted({ids[p] for _, p, _ in edges.inner} - set(outer))
    if inner:
        yield Q.flow_lock_parents, {"ids": inner}
    yield Q.flow_add_edges, {"job_ids": [r[0] for r in rows],
                             "parent_ids": [r[1] for r in rows],
                             "run_anyway": [r[2] for r in rows]}
    return ids


def check_members(specs: list[JobSpec], batch: object) -> None:
    """Raise EnqueueError for jobs that cannot join `batch`: a bad id, or an idempotency
    key (a live job holding it would be returned in its place, outside the batch)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 0 < batch < 2**63:
        raise EnqueueError(f"batch must be a batch's id (a positive int), not {batch!r}",
                           "batch")
    if any(s.idempotency_key is not None for s in specs):
        raise EnqueueError("idempotency_key and batch: a member of a batch cannot take an "
                           "idempotency key", "idempotency_key")
    if any(s.unique_key is not None or s.unique_for is not None or s.replace for s in specs):
        raise EnqueueError("unique keys and batch: a member of a batch cannot be folded into "
                           "another job", "unique_key")


def _insert_steps(specs: list[JobSpec], registry: Registry,
                  batch: int | None = None) -> Steps[list[int]]:
    """The jobs' insert (pending), and the ids of live jobs holding their idempotency keys."""
    if not specs:
        return []
    # Each type's policy from this process's registry, else from the policies its workers
    # published (job_types), else the documented defaults.
    types = {spec.type for spec in specs}
    known = yield from with_published_policies_steps(types, registry)
    if any_unique(specs, types, known):
        return (yield from _unique_insert_steps(specs, known, batch))
    return (yield from _plain_insert_steps(specs, known, batch))


def _plain_insert_steps(specs: list[JobSpec], known: Registry,
                        batch: int | None) -> Steps[list[int]]:
    """_insert_steps once the types' policies are known and no job has a unique key to
    settle (those given hold theirs)."""
    cols = _columns(specs, known, max_payload_bytes())
    cols["payloads"] = "[" + ",".join(cols["payloads"]) + "]"
    cols["batch_id"] = batch
    cols["trace_context"] = tracing.current_context()
    # A batch without idempotency keys needs no conflict arbitration (and its speculative
    # insertion, a WAL record per job): the keyless form of the statement.
    _, inserted = yield (Q.enqueue_jobs if cols["idempotency_keys"] else
                         Q.enqueue_jobs_keyless), cols
    by_key = {key: id_ for id_, key in inserted if key is not None}
    plain_ids = iter(sorted(id_ for id_, key in inserted if key is None))
    keys = cols["idempotency_keys"] or [None] * len(specs)
    missing = sorted({k for k in keys if k and k not in by_key})
    if missing:
        # Held by a live job that was there first; ON CONFLICT waited for its writer.
        _, live = yield Q.live_jobs_by_idempotency_key, {"keys": missing}
        # Folded into the live job, as a unique key's duplicate is (worker/jobs/uniqueness.py).
        by_key.update({key: Enqueued(id_, folded=True) for key, id_ in live})
        lost = [k for k in missing if k not in by_key]
        if lost:  # the holder finished between the two statements: insert afresh
            retry = [s for s in specs if s.idempotency_key in lost]
            again = yield from _plain_insert_steps(retry, known, None)
            for spec, id_ in zip(retry, again, strict=True):
                by_key[spec.idempotency_key] = id_
    # Identity values are drawn in insertion order, which follows ORDER BY ord.
    ids = [by_key[k] if k else next(plain_ids) for k in keys]
    if missing or cols["idempotency_keys"] and len(set(keys)) < len(keys):
        ids = yield from _idempotent_folds(keys, ids)
    return ids


def _idempotent_folds(keys: list[str | None], ids: list[int]) -> Steps[list[int]]:
    """`ids` with each enqueue a job of the same idempotency key took in marked folded (a
    live job's, or an earlier job's of the same call), recorded for the jobs' pages."""
    seen: set[str] = set()
    out: list[int] = []
    for key, id_ in zip(keys, ids, strict=True):
        folded = key is not None and (key in seen or getattr(id_, "folded", False))
        out.append(Enqueued(id_, folded=True) if folded else id_)
        if key is not None:
            seen.add(key)
    folds = [id_ for id_ in out if getattr(id_, "folded", False)]
    if folds:
        yield Q.unique_folds_record, {"job_ids": folds, "replaced": [False] * len(folds)}
    return out


def _unique_insert_steps(specs: list[JobSpec], known: Registry,
                         batch: int | None) -> Steps[list[int]]:
    """_insert_steps for a call with unique keys (worker/jobs/uniqueness.py): those jobs by
    their keys, the others as always; the ids in the order given."""
    terms = [terms_of(spec, known.get(spec.type)) for spec in specs]
    if batch is not None and any(t is not None for t in terms):
        raise EnqueueError("unique keys and batch: a member of a batch cannot be folded into "
                           "another job", "unique_key")
    plain = [i for i, t in enumerate(terms) if t is None]
    unique = [i for i, t in enumerate(terms) if t is not None]
    # Their payloads checked (size, model) before the keys' rows are written and locked:
    # a refused enqueue writes nothing.
    _columns([specs[i] for i in unique], known, max_payload_bytes())
    ids: list[int] = [0] * len(specs)
    if plain:
        plain_ids = yield from _plain_insert_steps([specs[i] for i in plain], known, batch)
        for i, id_ in zip(plain, plain_ids, strict=True):
            ids[i] = id_

    def columns(some: list[JobSpec]) -> dict[str, Any]:
        cols = _columns(some, known, max_payload_bytes())
        cols["payloads"] = "[" + ",".join(cols["payloads"]) + "]"
        return cols

    def insert(some: list[JobSpec]) -> Steps[list[int]]:
        # The plain insert: the uniqueness is settled, the jobs hold their keys.
        return (yield from _plain_insert_steps(some, known, batch))

    unique_ids = yield from unique_steps([specs[i] for i in unique],
                                         [t for t in terms if t is not None], columns, insert)
    for i, id_ in zip(unique, unique_ids, strict=True):
        ids[i] = id_
    return ids


def enqueue(conn: Any, type: str, payload: Mapping[str, Any], *, queue: str | None = None,
            priority: int = 0, run_at: datetime | None = None, delay: float | None = None,
            max_attempts: int | None = None, idempotency_key: str | None = None,
            version: int | None = None, concurrency_key: str | None = None,
            after: list[Parent] | None = None, batch: int | None = None,
            unique_key: str | None = None, unique_for: float | str | None = None,
            replace: bool | None = None, expires_at: datetime | None = None,
            registry: Registry = registry) -> Enqueued:
    """Enqueue one job in the caller's transaction and return its id (docs/architecture.md §4),
    an int whose `.folded` says it is an existing job's (docs/guide/uniqueness.md).
    `after`: job ids (or Dep(id, run_anyway=True)) it waits for (docs/guide/flows.md);
    `batch`: a batch it joins (enqueue_many); `unique_key`, `unique_for`, `replace`,
    `expires_at`: docs/guide/uniqueness.md."""
    spec = JobSpec(type=type, payload=payload, queue=queue, priority=priority, run_at=run_at,
                   delay=delay, max_attempts=max_attempts, idempotency_key=idempotency_key,
                   version=version, concurrency_key=concurrency_key, after=after,
                   unique_key=unique_key, unique_for=unique_for, replace=replace,
                   expires_at=expires_at)
    return _enqueued(enqueue_many(conn, [spec], batch=batch, registry=registry)[0])


def _enqueued(job_id: int) -> Enqueued:
    """An id as enqueue returns it (one made by a fresh insert was a plain int)."""
    return job_id if isinstance(job_id, Enqueued) else Enqueued(job_id)


async def enqueue_async(conn: Any, type: str, payload: Mapping[str, Any], *,
                        batch: int | None = None, registry: Registry = registry,
                        **options: Any) -> Enqueued:
    """enqueue for async code (see enqueue_many_async), with enqueue's keywords (queue,
    priority, run_at, delay, max_attempts, idempotency_key, version, concurrency_key, after,
    batch, unique_key, unique_for, replace, expires_at)."""
    spec = JobSpec(type=type, payload=payload, **options)  # a wrong keyword: TypeError
    return _enqueued((await enqueue_many_async(conn, [spec], batch=batch,
                                               registry=registry))[0])
