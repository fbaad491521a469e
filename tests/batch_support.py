"""Batches in every state, written through the runtime's own statements (open_batch, the
claim, the finish statement that counts members, an operator's cancel), for the batch
pages' integration, figures and browser tests.

`seed_batches(url)` leaves, on both sides of each boundary:

- batch `a` ("orders.csv", owner import:42, closed, all three callbacks): 6 completed,
  2 failed (on_failure came due and became a job), 1 unknown, 5 skipped by their
  handler, 3 cancelled by an operator, 1 running, 2 pending (one scheduled an hour
  ahead) and 1 waiting for one of them — on_complete and on_success not due. No two
  states hold as many members, so a count shown under the wrong state shows;
- batch `b` ("thumbs", owner import:43, closed): 2 completed and 1 failed, so every
  member is final: on_complete and on_failure came due, on_success never will;
- batch `c` ("empty", owner import:42): closed with no member, so it completed and
  succeeded at once (on_complete's job);
- batch `d` ("half", no owner) left open: its opener's block raised and the caller
  committed anyway; 1 pending member, no callback;
- jobs of the same types in no batch (`plain`: a completed, a failed and a pending one),
  and the callbacks' jobs, which are no member of the batch that enqueued them.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from jobwarden import JobSpec, Registry, enqueue, job, open_batch
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.ops.operations import cancel_job

LEASE = 30.0
WORKER = "batches-host:4242:abcdef"
#: One type per way a member ends here, so a claim of that type takes exactly those jobs.
TYPES = ("imp.ok", "imp.bad", "imp.lost", "imp.skip", "imp.run", "imp.pend", "imp.report")


def registry() -> Registry:
    reg = Registry()
    for name in TYPES:
        job(name, queue="imports", lease=LEASE, max_attempts=1, registry=reg)(
            lambda ctx, payload: None)
    return reg


REG = registry()


@dataclass
class Seeded:
    url: str
    #: Each batch's id by name, and its member ids by name (a list per kind).
    batch: dict[str, int]
    members: dict[str, dict[str, list[int]]]
    plain: dict[str, int]


class Boom(Exception):
    pass


def finish(conn: psycopg.Connection, job_type: str, status: S, outcome: O,
           code: str | None = None) -> list[int]:
    """Run every pending job of `job_type` to `status` through the claim and the finish
    statement (which counts the members into their batches)."""
    jobs = claim(conn, types=[job_type], leases=[LEASE], queues=None, limit=1000,
                 worker_id=WORKER)
    conn.commit()
    if status is S.RUNNING:
        return [j.id for j in jobs]
    write_batch(conn, [Completion(job_id=j.id, execution_id=j.execution_id, type=j.type,
                                  attempt=j.attempt, lease=LEASE, status=status,
                                  outcome=outcome, error_code=code, error=code, queue=j.queue,
                                  batch_id=j.batch_id)
                       for j in jobs])
    conn.commit()
    return [j.id for j in jobs]


def seed_batches(url: str) -> Seeded:
    who = {"actor": "ann", "role": "operator", "reason": "seeded"}
    report = JobSpec("imp.report", {"to": "ana@example.com"})
    members: dict[str, dict[str, list[int]]] = {}

    def add(batch, name: str, kind: str, n: int = 1, **options) -> list[int]:
        ids = [batch.enqueue(kind, {"n": i}, **options) for i in range(n)]
        members.setdefault(name, {}).setdefault(kind.removeprefix("imp."), []).extend(ids)
        return ids

    with psycopg.connect(url) as conn:
        plain = {"ok": enqueue(conn, "imp.ok", {}, registry=REG),
                 "bad": enqueue(conn, "imp.bad", {}, registry=REG),
                 "pend": enqueue(conn, "imp.pend", {}, registry=REG)}
        with open_batch(conn, description="orders.csv", owner="import:42", on_complete=report,
                        on_success=report, on_failure=report, registry=REG) as a:
            add(a, "a", "imp.ok", 6)
            add(a, "a", "imp.bad", 2)
            add(a, "a", "imp.lost")
            add(a, "a", "imp.skip", 5)
            add(a, "a", "imp.run")
            first = add(a, "a", "imp.pend")
            add(a, "a", "imp.pend", delay=3600)  # scheduled: pending, an hour ahead
            members["a"]["cancel"] = [a.enqueue("imp.pend", {"n": f"cancel {i}"})
                                      for i in range(3)]
            members["a"]["wait"] = [a.enqueue("imp.pend", {"n": "wait"}, after=first)]
        with open_batch(conn, description="thumbs", owner="import:43", on_complete=report,
                        on_success=report, on_failure=report, registry=REG) as b:
            add(b, "b", "imp.ok", 2)
            add(b, "b", "imp.bad")
        with open_batch(conn, description="empty", owner="import:42", on_complete=report,
                        registry=REG) as c:
            members["c"] = {}
        try:
            with open_batch(conn, description="half", registry=REG) as d:
                add(d, "d", "imp.pend")
                raise Boom
        except Boom:
            pass  # the batch stays open: the caller commits anyway
        conn.commit()
        finish(conn, "imp.ok", S.COMPLETED, O.COMPLETED)
        finish(conn, "imp.bad", S.FAILED, O.FAILED, "ROW_INVALID")
        finish(conn, "imp.lost", S.UNKNOWN, O.UNKNOWN, "AMBIGUOUS")
        finish(conn, "imp.skip", S.SKIPPED, O.SKIPPED, "NOT_NEEDED")
        finish(conn, "imp.run", S.RUNNING, O.COMPLETED)
        for job_id in members["a"]["cancel"]:
            assert cancel_job(conn, job_id, **who).ok
        conn.commit()
    return Seeded(url, {"a": a.id, "b": b.id, "c": c.id, "d": d.id}, members, plain)
