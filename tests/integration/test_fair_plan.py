"""The fair claim holds without statistics: on a never-analyzed backlog of one key's
100,000 jobs and 50 keys of 10, claiming a batch walks background_jobs_fair_idx one
probe per key and reads each key's first jobs, never every pending job (claim_fair_jobs)."""

from __future__ import annotations

import json

import psycopg
import pytest

from jobwarden import JobSpec, Registry, enqueue_many, job
from jobwarden.worker.engine.producer import FAIR_WALK_KEYS, claim_params
from jobwarden.worker.store.jobstore import numbered
from jobwarden.worker.store.queries import Q
from tests.conftest import _new_empty_database

BIG = 100_000
SMALL_KEYS, SMALL = 50, 10


@pytest.fixture(scope="module")
def fair_backlog(server_url, _migrated_template):
    with _new_empty_database(server_url, template=_migrated_template) as url:
        _fill(url)
        yield url


def _fill(url: str) -> None:
    reg = Registry()
    job("plan.fair", fair_key="tenant", registry=reg)(lambda ctx, p: None)
    job("plan.other", fair_key="tenant", registry=reg)(lambda ctx, p: None)
    with psycopg.connect(url) as conn:
        conn.execute("ALTER TABLE background_jobs SET (autovacuum_enabled = false)")
        for offset in range(0, BIG, 10_000):
            # Two types interleaved: the claim handles one, and must skip the other.
            enqueue_many(conn, [JobSpec("plan.fair" if i % 2 else "plan.other",
                                        {"tenant": "big", "n": i})
                                for i in range(offset, offset + 10_000)], registry=reg)
        enqueue_many(conn, [JobSpec("plan.fair", {"tenant": f"t{k:02d}", "n": i})
                            for k in range(SMALL_KEYS) for i in range(SMALL)], registry=reg)
        conn.commit()


def _plan(url: str, limit: int, generic: bool) -> tuple[int, str]:
    values = claim_params(types=["plan.fair"], leases=[30.0], queues=None, limit=limit,
                          worker_id="plan-fair")
    values.update(after=None, keys=FAIR_WALK_KEYS, weight_keys=None, weights=None)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_stats "
                            "WHERE tablename = 'background_jobs'").fetchone()[0] == 0
        if generic:
            text, names = numbered(Q.claim_fair_jobs)
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE generic_fair AS {text}")
            args = ", ".join(["%s"] * len(names))
            (plan,) = psycopg.ClientCursor(conn).execute(
                f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE generic_fair({args})",
                [values[n] for n in names]).fetchone()
        else:
            (plan,) = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
                                   + Q.claim_fair_jobs, values).fetchone()
        conn.rollback()
    top = plan[0]["Plan"]
    return top["Shared Hit Blocks"] + top["Shared Read Blocks"], json.dumps(plan)


@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize("limit", [10, 200])
def test_the_fair_claim_walks_the_fair_index_on_a_never_analyzed_backlog(
        fair_backlog, limit, generic):
    buffers, plan = _plan(fair_backlog, limit, generic)
    assert "background_jobs_fair_idx" in plan
    assert "Seq Scan" not in plan and "Bitmap Heap Scan" not in plan, plan
    assert "external merge" not in plan, plan
    # 51 keys: two probes each, and each claimed job's update and index entries; the
    # backlog alone is about 2,000 heap pages and 100,000 tuples.
    assert buffers < 30 * (limit + 2 * (SMALL_KEYS + 1)), plan


def _turn_sorts(plan: object) -> list[dict]:
    """The plan's sorts by turn (claim_fair_jobs' `locked`: ORDER BY ceil(nth / weight))."""
    found: list[dict] = []
    if isinstance(plan, dict):
        if any("ceil(" in key for key in plan.get("Sort Key", [])):
            found.append(plan)
        for value in plan.values():
            found += _turn_sorts(value)
    elif isinstance(plan, list):
        for value in plan:
            found += _turn_sorts(value)
    return found


@pytest.mark.parametrize("keys, sorted_rows", [(1, 0), (3, 10)])
def test_jobs_of_one_key_are_not_sorted_into_turns(migrated_database, keys, sorted_rows):
    # One key with work has all the batch for its share: no turn is cut, and the claim
    # costs what the plain claim costs, less nothing but the walk. Three keys of
    # ceil(10 / 3) = 4 each pick 12 for 10: the turns decide which 10.
    reg = Registry()
    job("plan.fair", fair_key="tenant", registry=reg)(lambda ctx, p: None)
    with psycopg.connect(migrated_database) as conn:
        enqueue_many(conn, [JobSpec("plan.fair", {"tenant": f"k{i % keys}", "n": i})
                            for i in range(300)], registry=reg)
        conn.commit()
        values = claim_params(types=["plan.fair"], leases=[30.0], queues=None, limit=10,
                              worker_id="plan-fair")
        values.update(after=None, keys=FAIR_WALK_KEYS, weight_keys=None, weights=None)
        (plan,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + Q.claim_fair_jobs,
                               values).fetchone()
        conn.rollback()
    sorts = _turn_sorts(plan)
    assert sorts, json.dumps(plan)
    assert sum(s.get("Actual Rows", 0) for s in sorts) == sorted_rows, json.dumps(plan)
