"""The claim holds without statistics: on a 100,000-job backlog that was never analyzed
(autovacuum may be off, nobody runs ANALYZE), claiming 10 jobs walks the claim index
in (aged priority rank, id) order and stops after them. It must not read every
pending job of the type and sort them, which is what a plan chosen on default
selectivities does (about 100,000 buffer hits, an external sort)."""

from __future__ import annotations

import json
import threading

import psycopg
import pytest

from jobwarden import JobSpec, Registry, enqueue_many, job
from jobwarden.worker.engine.config import DEFAULT_CLAIM_BATCH
from jobwarden.worker.engine.limits import LimitBook
from jobwarden.worker.engine.producer import FAIR_WALK_KEYS, claim, prepare_claims
from jobwarden.worker.engine.producer import claim_params as claim_jobs_params
from jobwarden.worker.jobs.registry import JobType
from jobwarden.worker.store.db import connect_kwargs
from jobwarden.worker.store.jobstore import numbered
from jobwarden.worker.store.queries import Q
from tests.helpers import wait_for

BACKLOG = 100_000
#: Claiming 10 jobs touches a few dozen index and heap pages plus the 10 updates and
#: execution rows; the backlog alone is about 1,800 heap pages and 100,000 tuples.
BUFFER_BOUND = 1_000


def make_backlog(url: str, keys: int | None = None) -> str:
    """Fill the migrated database `url`'s background_jobs, never analyzed, with a backlog
    of jobs of two types interleaved (the claim handles one: it must skip the other),
    spread over `keys` concurrency keys if given."""
    with psycopg.connect(url) as conn:
        # Even on a server with autovacuum on, this table keeps no statistics.
        conn.execute("ALTER TABLE background_jobs SET (autovacuum_enabled = false)")
        for offset in range(0, BACKLOG, 10_000):
            enqueue_many(conn, [JobSpec("plan.wanted" if i % 2 else "plan.other", {"n": i},
                                        concurrency_key=f"key:{i % keys}" if keys else None)
                                for i in range(offset, offset + 10_000)])
        conn.commit()
    return url


@pytest.fixture
def backlog_db(migrated_database):
    return make_backlog(migrated_database)


def claim_params(limit: int = 10, concurrency_limit: int = 1, queue: str = "default",
                 queues: list[str] | None = None) -> dict:
    """claim_jobs' parameters for a worker of `plan.wanted` declared on `queue`."""
    return claim_jobs_params(types=["plan.wanted"], leases=[30.0],
                             limits=[concurrency_limit], type_queues=[queue],
                             type_max_attempts=[5], queues=queues, limit=limit,
                             worker_id="plan-test")


def claim_plan(url: str, limit: int = 10, concurrency_limit: int = 1, *,
               generic: bool = False, **params) -> tuple[int, str]:
    """EXPLAIN (ANALYZE, BUFFERS) of claiming `limit` jobs, rolled back: (shared buffers
    hit + read, the plan as text). `generic`: the plan a producer's claim connection runs
    (prepared, and planned without its values: Q.claim_plans_generic), else the plan made
    for these values."""
    values = claim_params(limit, concurrency_limit, **params)
    with psycopg.connect(url) as conn:
        if generic:
            # The statement with $n for its named parameters, numbered in order of first
            # use as psycopg numbers them, prepared and run by its name.
            text, names = numbered(Q.claim_jobs)
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE generic_claim AS {text}")
            args = ", ".join(["%s"] * len(names))
            (plan,) = psycopg.ClientCursor(conn).execute(
                f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE generic_claim({args})",
                [values[n] for n in names]).fetchone()
        else:
            (plan,) = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + Q.claim_jobs,
                                   values).fetchone()
        conn.rollback()
    top = plan[0]["Plan"]
    return top["Shared Hit Blocks"] + top["Shared Read Blocks"], json.dumps(plan)


def test_claiming_from_a_never_analyzed_backlog_reads_a_bounded_number_of_buffers(backlog_db):
    with psycopg.connect(backlog_db) as conn:
        analyzed = conn.execute("SELECT count(*) FROM pg_stats "
                                "WHERE tablename = 'background_jobs'").fetchone()[0]
    assert analyzed == 0, "the table must have no statistics for this test to mean anything"
    buffers, plan = claim_plan(backlog_db)
    assert buffers < BUFFER_BOUND, plan
    assert "background_jobs_claim_rank_idx" in plan
    assert "external merge" not in plan


@pytest.mark.parametrize("limit", [1, DEFAULT_CLAIM_BATCH])
def test_the_generic_plan_of_a_claim_connection_walks_the_index(backlog_db, limit):
    # A producer's claim connection plans its claim once, without its values, from the
    # first claim on (worker/engine/producer.py, prepare_claims): that plan too must walk
    # the claim index and stop after the batch on a never-analyzed backlog.
    buffers, plan = claim_plan(backlog_db, limit=limit, generic=True)
    assert "plan.wanted" not in plan, "planned with its values, not generically"
    assert "background_jobs_claim_rank_idx" in plan
    assert "Bitmap Heap Scan" not in plan and "external merge" not in plan, plan
    assert buffers < 20 * max(limit, 50), plan


@pytest.mark.parametrize("limit", [DEFAULT_CLAIM_BATCH, 1_000])
def test_a_full_batch_planned_with_its_limit_walks_the_index_too(backlog_db, limit):
    # A claim planned with its parameters (the first calls of a connection, and every
    # call through a pooler that prepares nothing) must not weigh its batch against the
    # planner's guess of the pending rows, a few hundred without statistics: a batch of
    # that size looks like "all of them", and the plan reads and sorts every pending job.
    buffers, plan = claim_plan(backlog_db, limit=limit)
    assert "background_jobs_claim_rank_idx" in plan
    assert "Bitmap Heap Scan" not in plan and "external merge" not in plan, plan
    # Each claimed job costs its update and a few index pages; the backlog is ~100,000.
    assert buffers < 20 * limit, plan


@pytest.mark.parametrize("priorities", ["equal", "varied"])
def test_misleading_statistics_do_not_change_the_claim(backlog_db, priorities):
    # Statistics taken when no job was pending say that claiming finds almost nothing,
    # which makes sorting "all pending jobs" look free; the backlog is back meanwhile.
    # Varied priorities (negative ones too) leave no column of the rank in physical
    # order, which must not matter either.
    with psycopg.connect(backlog_db) as conn:
        if priorities == "varied":
            conn.execute("UPDATE background_jobs SET priority = id % 7 - 3")
        conn.execute("UPDATE background_jobs SET status = 'completed'")
        conn.execute("ANALYZE background_jobs")
        conn.execute("UPDATE background_jobs SET status = 'pending'")
        conn.commit()
    buffers, plan = claim_plan(backlog_db)
    assert buffers < BUFFER_BOUND, plan
    assert "background_jobs_claim_rank_idx" in plan


def test_the_claim_takes_the_batch_in_priority_order_skipping_other_types(backlog_db):
    with psycopg.connect(backlog_db) as conn:
        # 100 levels are 1,000 s of head start: more than the backlog waited.
        urgent = enqueue_many(conn, [JobSpec("plan.wanted", {"urgent": True},
                                             priority=100)])[0]
        conn.commit()
        rows = conn.execute(Q.claim_jobs, claim_params(limit=3)).fetchall()
        conn.commit()
    assert [r[0] for r in rows] == [urgent, 2, 4]  # ids 1, 3, ... are the other type
    assert {r[2] for r in rows} == {"plan.wanted"}


def test_a_backlog_of_keyed_jobs_is_claimed_by_the_same_walk(migrated_database):
    # Each job walked past costs a look at its key's running jobs; the walk still stops
    # after the batch and sorts nothing.
    url = make_backlog(migrated_database, keys=1_000)
    buffers, plan = claim_plan(url, concurrency_limit=2)
    assert buffers < BUFFER_BOUND, plan
    assert "background_jobs_claim_rank_idx" in plan
    assert "external merge" not in plan


def test_a_backlog_that_took_the_default_queue_is_claimed_for_its_declared_queue_by_the_walk(
        backlog_db):
    # Every job of the backlog was enqueued before any policy was known: its queue is
    # "default" in the row and "reports" for a worker that declares the type there and
    # serves only that queue. Resolving it is part of the filter, not of the plan.
    with psycopg.connect(backlog_db) as conn:
        assert conn.execute("SELECT bool_and(policy_defaults = '{queue,max_attempts}') "
                            "FROM background_jobs").fetchone()[0]
    buffers, plan = claim_plan(backlog_db, queue="reports", queues=["reports"])
    assert buffers < BUFFER_BOUND, plan
    assert "background_jobs_claim_rank_idx" in plan
    with psycopg.connect(backlog_db) as conn:
        rows = conn.execute(Q.claim_jobs, claim_params(queue="reports",
                                                       queues=["reports"])).fetchall()
        conn.rollback()
    assert [(r[1], r[2]) for r in rows] == [("reports", "plan.wanted")] * 10


def claim_statements(conn) -> list[tuple[int, int]]:
    """(generic plans, custom plans) of each claim statement this session prepared."""
    return conn.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                        "WHERE statement LIKE '-- jobwarden: claim_jobs%'").fetchall()


def test_a_claim_connection_plans_its_claim_once(backlog_db):
    # Planning claim_jobs takes milliseconds; a claim connection pays it on its first
    # claim only, not on each of its first ten (the first jobs an idle worker is sent).
    with psycopg.connect(backlog_db, autocommit=True) as conn:
        prepare_claims(conn)
        for _ in range(8):
            assert len(claim(conn, types=["plan.wanted"], leases=[30.0], queues=None,
                             limit=1, worker_id="plan-test")) == 1
        assert claim_statements(conn) == [(8, 0)]


def test_through_a_transaction_pooler_a_claim_connection_prepares_nothing(backlog_db,
                                                                           monkeypatch):
    # There a SET would stay on a server connection other clients share, and nothing is
    # prepared (worker/store/db.py, connect_kwargs).
    monkeypatch.setenv("JOBWARDEN_POOLER", "transaction")
    with psycopg.connect(backlog_db, autocommit=True, **connect_kwargs()) as conn:
        prepare_claims(conn)
        assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "auto"
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
        claim(conn, types=["plan.wanted"], leases=[30.0], queues=None, limit=1,
              worker_id="plan-test")
        assert claim_statements(conn) == []


def test_a_claim_connection_alone_commits_without_waiting_for_the_flush(backlog_db):
    # Its claims only (Q.claim_commits_async says why a lost one is safe); every other
    # session of the worker (outcomes, the effects ledger, hand-backs) keeps the server's
    # setting.
    with psycopg.connect(backlog_db, autocommit=True) as conn, \
            psycopg.connect(backlog_db, autocommit=True) as other:
        prepare_claims(conn)
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"
        assert other.execute("SHOW synchronous_commit").fetchone()[0] == "on"
        assert len(claim(conn, types=["plan.wanted"], leases=[30.0], queues=None, limit=1,
                         worker_id="plan-test")) == 1
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"


def _young_generic_plan(url: str, query: str, values: dict) -> dict:
    """The plan a claim connection keeps when its first claim came while the table was
    near empty (an idle worker's): prepared generically with a dozen jobs in the table,
    run once, then explained, as a claim connection's later claims run it."""
    text, names = numbered(query)
    args = ", ".join(["%s"] * len(names))
    with psycopg.connect(url) as conn:
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE young_claim AS {text}")
        cur = psycopg.ClientCursor(conn)
        cur.execute(f"EXECUTE young_claim({args})", [values[n] for n in names])
        (plan,) = cur.execute(f"EXPLAIN (FORMAT JSON) EXECUTE young_claim({args})",
                              [values[n] for n in names]).fetchone()
        conn.rollback()
    return plan[0]["Plan"]


def _update_node(node: dict) -> dict:
    if node.get("Node Type") == "ModifyTable" and node.get("Operation") == "Update":
        return node
    for child in node.get("Plans", []):
        found = _update_node(child)
        if found:
            return found
    return {}


def _scans_of(node: dict, alias: str) -> list[dict]:
    """The nodes in this subtree that read the relation under `alias`."""
    own = [node] if node.get("Alias") == alias else []
    return own + [s for child in node.get("Plans", []) for s in _scans_of(child, alias)]


def _limited_values() -> dict:
    book = LimitBook([JobType(name="plan.wanted", handler=lambda ctx, p: None,
                              rate_limit=1000.0)])
    limited = book.for_lane(lambda queue: True)
    assert limited is not None
    return {**claim_params(limit=DEFAULT_CLAIM_BATCH), **limited.params}


def _fair_values() -> dict:
    return {**claim_params(limit=DEFAULT_CLAIM_BATCH), "after": None, "keys": FAIR_WALK_KEYS,
            "weight_keys": None, "weights": None}


def _fair_registry() -> Registry:
    """plan.wanted with a fair key (`tenant`), for the jobs the fair claim takes."""
    reg = Registry()
    job("plan.wanted", fair_key="tenant", registry=reg)(lambda ctx, p: None)
    return reg


def _young_plan(url: str, name: str, values: dict) -> dict:
    """`name`'s young plan (_young_generic_plan) with a dozen jobs of three fair keys in
    the table (the plain claims take them as any other)."""
    with psycopg.connect(url) as conn:
        enqueue_many(conn, [JobSpec("plan.wanted", {"tenant": f"t{i % 3}", "n": i})
                            for i in range(12)], registry=_fair_registry())
        conn.commit()
    return _young_generic_plan(url, Q[name], values)


@pytest.mark.parametrize("name, values", [
    ("claim_jobs", lambda: claim_params(limit=DEFAULT_CLAIM_BATCH)),
    ("claim_limited_jobs", _limited_values),
    ("claim_fair_jobs", _fair_values)])
def test_a_young_claim_plan_finds_each_claimed_row_by_its_primary_key(migrated_database,
                                                                      name, values):
    # The generic plan made on a near-empty table, kept while finished jobs pile up in
    # it: joined to the batch by hash, it read the whole table at every claim (claim_jobs
    # says what that cost an idle worker); the fair claim's read it once per claimed job.
    # One probe of the primary key per row instead.
    update = _update_node(_young_plan(migrated_database, name, values()))
    assert update, f"{name} has no UPDATE node"
    # The rows the UPDATE writes, as its subtree reads them (not the keyed slots' look-up).
    scans = [(n["Node Type"], n.get("Index Name"))
             for child in update["Plans"] for n in _scans_of(child, update["Alias"])]
    assert scans == [("Index Scan", "background_jobs_pkey")], json.dumps(update)


def _nodes(node: dict) -> list[dict]:
    """This node and every node below it, subplans included."""
    return [node] + [n for child in node.get("Plans", []) for n in _nodes(child)]


def _cte(node: dict, name: str) -> dict:
    """The plan of the CTE `name` in this subtree ({} if none)."""
    if node.get("Subplan Name") == f"CTE {name}":
        return node
    for child in node.get("Plans", []):
        found = _cte(child, name)
        if found:
            return found
    return {}


def test_a_young_fair_claim_plan_picks_each_keys_jobs_from_the_fair_index(migrated_database):
    # On a table of a few pages the claim index looked as good for a key's pick as the
    # fair index: kept for a backlog, that plan read every pending job ranked before a
    # key's first, once per key walked (claim_fair_jobs, `picked`).
    picked = _cte(_young_plan(migrated_database, "claim_fair_jobs", _fair_values()),
                  "picked")
    assert picked, "claim_fair_jobs has no `picked` CTE"
    # The jobs it locks (not the look-up of their concurrency key's running jobs).
    indexes = {(n["Node Type"], n.get("Index Name")) for n in _nodes(picked)
               if n.get("Relation Name") == "background_jobs" and n.get("Alias") != "r"}
    assert indexes == {("Index Scan", "background_jobs_fair_idx")}, json.dumps(picked)


@pytest.mark.parametrize("name, values", [
    ("claim_jobs", lambda: claim_params(limit=10)),
    ("claim_fair_jobs", lambda: {**_fair_values(), "limit": 10})])
def test_a_job_changed_and_committed_while_a_claim_runs_is_still_claimed(clean_db, name,
                                                                         values):
    # The claim's walk is slowed (a sleep in its filter, the statement otherwise as it
    # is) so that another transaction changes the job it has read and commits before the
    # walk locks it. The lock then takes the job's newest version, which the statement's
    # snapshot does not see; the UPDATE must still find it (joined by id, the server
    # re-reads that version), not leave it pending and the batch short, which the
    # producer takes for "no more work" (claim_jobs, its UPDATE's join). The fair claim's
    # walk is its pick of each key's jobs.
    walk = "AND (SELECT j.type = ANY(%(types)s::text[])"
    assert Q[name].count(walk) == 1
    slowed = Q[name].replace(walk, "AND pg_sleep(0.3) IS NOT NULL " + walk)
    with psycopg.connect(clean_db, autocommit=True) as feed, \
            psycopg.connect(clean_db, autocommit=True) as claimer:
        (job_id,) = enqueue_many(feed, [JobSpec("plan.wanted", {"tenant": "t"})],
                                 registry=_fair_registry())

        def change() -> None:
            # The claim has its snapshot and sleeps in its walk.
            wait_for(lambda: feed.execute(
                "SELECT wait_event FROM pg_stat_activity WHERE pid = %s",
                [claimer.info.backend_pid]).fetchone()[0] == "PgSleep",
                message="the claim to sleep in its walk")
            feed.execute("UPDATE background_jobs SET priority = priority + 1 WHERE id = %s",
                         [job_id])

        changer = threading.Thread(target=change)
        changer.start()
        rows = claimer.execute(slowed, values()).fetchall()
        changer.join()
        state = feed.execute("SELECT status, priority FROM background_jobs WHERE id = %s",
                             [job_id]).fetchone()
    assert [r[0] for r in rows] == [job_id]
    assert state == ("running", 1)
