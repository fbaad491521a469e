"""Uniqueness windows and debounce: an enqueue folded into the job that holds its key.

A job enqueued with a unique key (`unique_key=`, or with `unique_for` alone its type
and payload) holds the key. Another enqueue of the key creates no job and returns the
holder's id while the holder is pending or running, or, with `unique_for`, for that long
after the holder was enqueued, whatever its state. With `replace` (debounce), a holder
that has not started yet takes the newer enqueue's payload, version, run time and
deadline instead; a holder that started keeps its payload and the enqueue creates a job.

Each key has a row in `job_unique_keys` (migration 0081) that every enqueue of the key
locks first, until the caller's transaction ends: concurrent enqueuers of one key decide
one after the other, each in a statement that sees what the previous one committed. A
replace is a compare-and-set on the holder's state (`unique_replace_pending`), so it
lands before a claim or not at all. docs/guide/uniqueness.md.

Not the idempotency key: that names one operation (the effects ledger keys on it, and
one live job holds it); jobs of one unique key in two windows are two operations.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from jobwarden.worker.core.errors import EnqueueError
from jobwarden.worker.jobs.job_spec import JobSpec
from jobwarden.worker.jobs.registry import JobType, Registry
from jobwarden.worker.store.jobstore import Steps
from jobwarden.worker.store.queries import Q

#: (key, window in seconds or None, replace) of one spec.
Terms = tuple[str, float | None, bool]


class Enqueued(int):
    """A job's id as enqueue returns it: an int, and what the enqueue did.

    `folded`: the id is an existing job's and this enqueue created none; `replaced`: it
    also gave that job this enqueue's payload and run time (debounce)."""

    folded: bool
    replaced: bool

    def __new__(cls, job_id: int, *, folded: bool = False, replaced: bool = False) -> Enqueued:
        self = super().__new__(cls, job_id)
        self.folded = folded
        self.replaced = replaced
        return self

    def __repr__(self) -> str:
        return f"Enqueued({int(self)}, folded={self.folded}, replaced={self.replaced})"

    # Everywhere else it reads as the id it is: str(), f-strings, %d, URLs, JSON, logs.
    def __str__(self) -> str:
        return int.__repr__(self)

    def __format__(self, spec: str) -> str:
        return int.__format__(int(self), spec)


def any_unique(specs: list[JobSpec], types: set[str], known: Registry) -> bool:
    """Whether any of `specs` (validated) takes the unique path: the plain enqueue asks
    only this."""
    for name in types:
        job_type = known.get(name)
        if job_type is not None and (job_type.unique_for or job_type.replace):
            return True
    return any(s.unique_key is not None or s.unique_for is not None or s.replace
               for s in specs)


def terms_of(spec: JobSpec, job_type: JobType | None) -> Terms | None:
    """A spec's key, window and mode, its type's declaration filling what it leaves
    unset; None for a spec that takes the plain path."""
    window = spec.unique_for if spec.unique_for is not None else (
        job_type.unique_for if job_type else None)
    replace = spec.replace if spec.replace is not None else (
        job_type.replace if job_type else False)
    key = spec.unique_key
    # An idempotency key names one operation: it takes the plain path whatever the type
    # declares (given with unique terms of its own, validate refused it).
    if key is None and (window is None and not replace or spec.idempotency_key is not None):
        return None
    if spec.after:
        raise EnqueueError(f"after and {spec.type}'s uniqueness: a job that waits for "
                           "parents cannot be folded into another", "after")
    if key is None:
        if replace:
            raise EnqueueError(f"{spec.type} debounces (replace=True): give the job a "
                               "unique_key", "unique_key")
        if window is None:
            return None
        key = payload_key(spec)
    assert window is None or isinstance(window, float)
    return key, window, replace


def payload_key(spec: JobSpec) -> str:
    """The key of a job enqueued with a window and no key: its type and its payload (the
    payload's JSON with sorted keys, hashed: equal payloads, equal keys)."""
    raw = spec.payload
    if hasattr(raw, "model_dump"):
        raw = raw.model_dump(mode="json")
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    return f"{spec.type}:sha256:{hashlib.sha256(text.encode()).hexdigest()}"


#: What the unique path needs of enqueue: the column arrays of specs (enqueue._columns,
#: with the payloads as one JSON array) and the plain insert's steps.
Columns = Callable[[list[JobSpec]], dict[str, Any]]
Insert = Callable[[list[JobSpec]], Steps[list[int]]]


def unique_steps(specs: list[JobSpec], terms: list[Terms], columns: Columns,
                 insert: Insert) -> Steps[list[int]]:
    """The statements of an enqueue of `specs`, each with its `terms`; returns their ids
    in the order given. Specs of one key in one call act as if enqueued one after another:
    the first decides (the last, when one of them replaces), the others fold into it."""
    groups: dict[str, list[int]] = {}
    for i, (key, _, _) in enumerate(terms):
        groups.setdefault(key, []).append(i)
    keys = sorted(groups)
    _, rows = yield Q.unique_keys_lock, {"keys": keys}
    held = {key: (job_id, bool(in_window)) for key, job_id, in_window in rows}
    holder_ids = [job_id for job_id, _ in held.values() if job_id is not None]
    # (live, replaceable) of each holder still there (retention deletes a key with its job)
    holders: dict[int, tuple[bool, bool]] = {}
    if holder_ids:
        _, rows = yield Q.unique_key_holders, {"ids": holder_ids}
        holders = {job_id: (live, replaceable) for job_id, live, replaceable in rows}
    deciding = {key: (idx[-1] if any(terms[i][2] for i in idx) else idx[0])
                for key, idx in groups.items()}

    replaced: set[str] = set()
    wanted = [key for key in keys if terms[deciding[key]][2]
              and holders.get(held[key][0] or 0, (False, False))[1]]
    if wanted:
        cols = columns([specs[deciding[key]] for key in wanted])
        _, rows = yield Q.unique_replace_pending, {
            "ids": [held[key][0] for key in wanted], "payloads": cols["payloads"],
            "versions": cols["versions"], "run_ats": cols["run_ats"], "delays": cols["delays"],
            "expires_ats": cols["expires_ats"], "expires_afters": cols["expires_afters"]}
        done = {row[0] for row in rows}
        replaced = {key for key in wanted if held[key][0] in done}

    ids: dict[str, int] = {}
    fresh: list[str] = []
    for key in keys:
        job_id, in_window = held[key]
        live = job_id in holders and holders[job_id][0]
        replace = terms[deciding[key]][2]
        if key in replaced or (job_id in holders and in_window) or (live and not replace):
            assert job_id is not None
            ids[key] = job_id
        else:  # no holder, or one that started or ended outside its window: a new job
            fresh.append(key)
    if fresh:
        new_specs = [_with_key(specs[deciding[key]], key) for key in fresh]
        new_ids = yield from insert(new_specs)
        ids.update(zip(fresh, new_ids, strict=True))
        yield Q.unique_keys_hold, {"keys": fresh, "job_ids": new_ids,
                                   "windows": [terms[deciding[key]][1] for key in fresh]}

    out: list[int] = []
    folds: list[tuple[int, bool]] = []
    for i, (key, _, _) in enumerate(terms):
        created = i == deciding[key] and key in fresh
        was_replaced = i == deciding[key] and key in replaced
        out.append(Enqueued(ids[key], folded=not created, replaced=was_replaced))
        if not created:
            folds.append((ids[key], was_replaced))
    if folds:
        yield Q.unique_folds_record, {"job_ids": [f[0] for f in folds],
                                      "replaced": [f[1] for f in folds]}
    return out


def _with_key(spec: JobSpec, key: str) -> JobSpec:
    """The spec as inserted: holding its key (a key derived from the payload included)."""
    if spec.unique_key == key:
        return spec
    copy = JobSpec(**{**spec.__dict__, "unique_key": key})
    return copy
