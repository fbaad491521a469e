"""A hot connection plans again once its statements outgrow the plans it keeps
(worker/store/db.py, DedicatedConnection.handled and .replan).

The server keeps a prepared statement's generic plan for the session, sized by the tables
when it was made. A claim connection that ran its first claims on a near-empty queue (a
worker that started idle) kept plans made for a table of a few rows for every later claim
of a backlog: its claim once joined the claimed ids to the whole table by hash, a
sequential scan of every job (it probes the primary key now, the fair claim's too).
auto_explain reports to the client the plan each claim actually runs; the cost it
estimates for the claim's walk of the claim index tells a plan made for the near-empty
table from one made for the backlog.
"""

from __future__ import annotations

import re

import psycopg
import pytest

from jobwarden import JobSpec, enqueue_many
from jobwarden.worker.engine.producer import claim, prepare_claims
from jobwarden.worker.store import db
from jobwarden.worker.store.db import DedicatedConnection
from tests.helpers import explained

KW = dict(types=["replan.noop"], leases=[30.0], queues=None, worker_id="w")


def claim_plans(dedicated: DedicatedConnection, plans: list[str], limit: int) -> list[str]:
    """Claim as a producer does; the plans of that claim (auto_explain's, in `plans`)."""
    plans.clear()
    jobs = claim(dedicated.get(), limit=limit, **KW)
    dedicated.handled(len(jobs))
    dedicated.replan()
    return [p for p in plans if "jobwarden: claim_jobs" in p]


def idle_then_backlog(url: str, dedicated: DedicatedConnection, plans: list[str],
                      limit: int) -> None:
    """Claims of `limit` on an idle queue, one job at a time, past the runs after which
    the session keeps a generic plan in any case (psycopg prepares at the fifth, the
    server plans generically from the sixth on); then a backlog of 20,000 jobs."""
    with psycopg.connect(url) as writer:
        for i in range(12):
            enqueue_many(writer, [JobSpec("replan.noop", {"i": i})])
            writer.commit()
            claim_plans(dedicated, plans, limit)
        enqueue_many(writer, [JobSpec("replan.noop", {"i": i}) for i in range(20_000)])
        writer.commit()


def walk_cost(plan: str) -> float:
    """The total cost the plan estimates for the claim's walk of the claim index: a few
    dozen on a near-empty table, a thousand or more on the backlog."""
    (cost,) = re.findall(r"Index Scan using background_jobs_claim_rank_idx on "
                         r"background_jobs j\s+\(cost=[\d.]+\.\.([\d.]+)", plan)
    return float(cost)


#: A plan made for the backlog estimates its walk at least this many times one made for
#: the near-empty table.
GREW = 10


def plan_mode(dedicated: DedicatedConnection) -> str:
    return dedicated.get().execute("SHOW plan_cache_mode").fetchone()[0]


@pytest.mark.parametrize("as_a_producer", [True, False],
                         ids=["generic-from-the-first-claim", "server-chooses"])
def test_a_claim_connection_that_started_idle_plans_again_for_a_backlog(explain_db,
                                                                        as_a_producer):
    dedicated = DedicatedConnection(explain_db)
    plans = explained(dedicated.get())
    if as_a_producer:  # a producer's claim connection: generic plans from the first run
        prepare_claims(dedicated.get())
    idle_then_backlog(explain_db, dedicated, plans, 200)
    (first,) = claim_plans(dedicated, plans, 200)
    # The plan made on the near-empty table still runs the first claim of the backlog ...
    # ... the connection sees the first large batch, and the next claim is planned for
    # the table as it is now.
    (second,) = claim_plans(dedicated, plans, 200)
    assert walk_cost(second) > GREW * walk_cost(first), (first, second)
    # (a producer's claim connection planned generically, and still does)
    assert plan_mode(dedicated) == ("force_generic_plan" if as_a_producer else "auto")
    dedicated.drop()


def test_a_connection_lost_while_planning_again_is_not_the_callers_failure(clean_db):
    # The claim (or outcome batch) before went through: its jobs are held, its outcomes
    # written. Failing here would make the producer take claimed jobs for lost.
    dedicated = DedicatedConnection(clean_db)
    conn = dedicated.get()
    with psycopg.connect(clean_db, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
    dedicated.handled(200)
    assert dedicated.replan_due
    dedicated.replan()
    fresh = dedicated.get()
    assert fresh is not conn
    assert fresh.execute("SELECT 1").fetchone() == (1,)
    dedicated.drop()


def test_a_claim_connection_whose_claims_stay_small_plans_again_for_a_backlog(
        explain_db, monkeypatch):
    # A worker of slow jobs claims a few at a time, backlog or not: no batch ever says
    # the table has grown. Its plans are made again once they are REPLAN_SECONDS old.
    monkeypatch.setattr(db, "REPLAN_SECONDS", 3600.0)  # young while the queue is idle
    dedicated = DedicatedConnection(explain_db)
    plans = explained(dedicated.get())
    prepare_claims(dedicated.get())
    idle_then_backlog(explain_db, dedicated, plans, 10)
    (first,) = claim_plans(dedicated, plans, 10)
    (second,) = claim_plans(dedicated, plans, 10)
    assert walk_cost(second) == walk_cost(first), (first, second)  # the young plan
    monkeypatch.setattr(db, "REPLAN_SECONDS", 0.0)  # ... and now they are old
    (_,) = claim_plans(dedicated, plans, 10)  # the plans it ran under go after it
    (fourth,) = claim_plans(dedicated, plans, 10)
    assert walk_cost(fourth) > GREW * walk_cost(first), (first, fourth)
    dedicated.drop()
