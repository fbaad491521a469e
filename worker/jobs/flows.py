"""Flows: a job enqueued `after` its parents waits until every one has completed.

`after=[...]` lists a job's parents: a job id (an int), the `key` of another JobSpec in
the same enqueue_many call (a str), that call's job at a position (`At(n)`), or any of
these wrapped in `Dep(parent, run_anyway=True)` for an edge its parent satisfies by
reaching any final state (a cleanup step). So a whole graph is enqueued in one call, in
the caller's transaction. The rule when a parent does not complete, and the statements
that release dependents, are in docs/guide/flows.md and worker/store/sql/flows.sql.

Everything a call can get wrong is refused with an EnqueueError before any statement
writes: an unknown key, a position out of range, a cycle, a parent job that does not
exist (checked under the parents' row locks, so none can be deleted meanwhile).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobwarden.worker.core.errors import EnqueueError

#: Most parents one job may wait for: a fan-in of more belongs in a batch.
MAX_PARENTS = 10_000


@dataclass(frozen=True)
class At:
    """The job at `position` (from 0) of the same enqueue_many call."""

    position: int


@dataclass(frozen=True)
class Dep:
    """One parent: a job id, a key of the same call, or At(n). `run_anyway`: the edge is
    satisfied when the parent reaches any final state (completed, failed, cancelled,
    skipped), not only when it completes."""

    parent: int | str | At
    run_anyway: bool = False


Parent = int | str | At | Dep


def check_after(after: object) -> None:
    """Raise EnqueueError for an `after` that cannot be read (no connection needed)."""
    if not isinstance(after, list | tuple):
        raise EnqueueError(f"after must be a list of parents, not {type(after).__name__}",
                           "after")
    if len(after) > MAX_PARENTS:
        raise EnqueueError(f"after lists {len(after)} parents, over the limit of "
                           f"{MAX_PARENTS}: fan in through a batch", "after")
    for i, entry in enumerate(after):
        parent = entry.parent if isinstance(entry, Dep) else entry
        if isinstance(entry, Dep) and not isinstance(entry.run_anyway, bool):
            raise EnqueueError(f"after[{i}].run_anyway must be True or False", "after")
        if isinstance(parent, bool) or not isinstance(parent, int | str | At):
            raise EnqueueError(f"after[{i}]: a parent is a job id (int), a key (str), At(n) "
                               f"or Dep(...), not {type(parent).__name__}", "after")
        if isinstance(parent, int) and not 0 < parent < 2**63:
            raise EnqueueError(f"after[{i}]: {parent} is not a job id", "after")
        if isinstance(parent, At) and (isinstance(parent.position, bool)
                                       or not isinstance(parent.position, int)):
            raise EnqueueError(f"after[{i}]: At takes an integer position", "after")


@dataclass(frozen=True)
class Edges:
    """A call's edges: to jobs of the call (by position) and to existing jobs (by id)."""

    #: (child position, parent position, run_anyway)
    inner: list[tuple[int, int, bool]]
    #: (child position, parent job id, run_anyway)
    outer: list[tuple[int, int, bool]]

    def __bool__(self) -> bool:
        return bool(self.inner or self.outer)


def resolve(afters: Sequence[Sequence[Parent] | None], keys: Sequence[str | None]) -> Edges:
    """The edges of a call whose i-th job lists `afters[i]` and has client key `keys[i]`;
    EnqueueError for a duplicate or unknown key, a position out of range, or a cycle."""
    by_key: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key is None:
            continue
        if key in by_key:
            raise EnqueueError(f"key {key!r} is given to jobs {by_key[key]} and {i} of the "
                               "call: a key names one job", "key")
        by_key[key] = i
    inner: dict[tuple[int, int], bool] = {}
    outer: dict[tuple[int, int], bool] = {}
    for child, after in enumerate(afters):
        for entry in after or ():
            anyway = entry.run_anyway if isinstance(entry, Dep) else False
            parent = entry.parent if isinstance(entry, Dep) else entry
            if isinstance(parent, str):
                if parent not in by_key:
                    raise EnqueueError(f"job {child} of the call waits for key {parent!r}, "
                                       "which no job of the call has", "after")
                parent = At(by_key[parent])
            if isinstance(parent, At):
                if not 0 <= parent.position < len(afters):
                    raise EnqueueError(f"job {child} of the call waits for position "
                                       f"{parent.position}, outside the call's "
                                       f"{len(afters)} jobs", "after")
                edge, table = (child, parent.position), inner
            else:
                edge, table = (child, parent), outer
            # Listed twice: run anyway only if every listing says so.
            table[edge] = table.get(edge, True) and anyway
    _refuse_cycles(len(afters), inner)
    return Edges([(c, p, a) for (c, p), a in inner.items()],
                 [(c, p, a) for (c, p), a in outer.items()])


def _refuse_cycles(n: int, inner: dict[tuple[int, int], bool]) -> None:
    """Kahn's walk over the call's own edges: what is left unwalked lies on a cycle.
    (An existing job cannot wait for a job not yet enqueued: no cycle goes outside.)"""
    children: dict[int, list[int]] = {}
    parents_left = [0] * n
    for child, parent in inner:
        children.setdefault(parent, []).append(child)
        parents_left[child] += 1
    ready = [i for i in range(n) if parents_left[i] == 0]
    walked = 0
    while ready:
        node = ready.pop()
        walked += 1
        for child in children.get(node, ()):
            parents_left[child] -= 1
            if parents_left[child] == 0:
                ready.append(child)
    if walked < n:
        stuck = sorted(i for i in range(n) if parents_left[i] > 0)
        raise EnqueueError(f"the call's jobs wait for each other in a cycle (positions "
                           f"{', '.join(map(str, stuck[:10]))}{'...' if len(stuck) > 10 else ''}"
                           "): nothing was enqueued", "after")
