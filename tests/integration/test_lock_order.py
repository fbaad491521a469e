"""Statements that lock several running jobs lock them in job-id order, whatever the
plan: two of them (a worker's heartbeat and its completer's batch, or its hand-back)
then wait for each other instead of deadlocking (40P01).

Each test holds the lowest job's row lock in one transaction, starts the statement under
test on the jobs given highest id first, waits until it blocks, and then checks that the
higher job's row is still free. A statement that had locked the higher row first (in the
input's order, or in the heap's: the lower job's row was rewritten, so it now lies after
the other) would hold it while waiting: the pattern of a deadlock.

"Whatever the plan": each runs on a table of a realistic size whose statistics are absent
(never analyzed), fresh, or stale (TRUNCATE keeps them: here they say almost no job is
running, so a scan of the running jobs looks cheaper than a lookup per row); with the
statement's two rows alone or among a completer's full batch of others' jobs (which hash
joins like); planned for its values, and generically (as the server plans a statement
prepared long enough).
"""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

from jobwarden import Registry, enqueue, job
from jobwarden.worker.engine.completer import finish_params
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.store.jobstore import numbered
from jobwarden.worker.store.queries import Q, batch_params
from tests.helpers import wait_for

LEASE = 30.0
FILLER = 20_000  # other workers' running jobs
STALE = 50_000  # ended jobs the stale statistics were taken of
BATCH = 100  # a completer's batch (worker/engine/completer.py)
STATISTICS = ["never analyzed", "analyzed", "stale"]
#: (rows sent besides the two jobs, plan): the others are other workers' running jobs,
#: which this statement does not own (so it refuses them and locks none).
SHAPES = [(0, "custom"), (BATCH - 2, "custom"), (BATCH - 2, "generic")]


@pytest.fixture(params=STATISTICS)
def lock_db(request, migrated_database):
    """A migrated database of its own whose background_jobs' statistics stay as the test
    leaves them (autovacuum off for it: TRUNCATE keeps them, so a shared database's are
    whatever earlier tests left)."""
    with psycopg.connect(migrated_database, autocommit=True) as conn:
        conn.execute("ALTER TABLE background_jobs SET (autovacuum_enabled = false)")
        if request.param == "stale":
            # Statistics of another content: every job ended, none running.
            conn.execute("INSERT INTO background_jobs (queue, type, payload, status) "
                         "SELECT 'old', 'locks.old', '{}', 'completed' "
                         "FROM generate_series(1, %s)", [STALE])
            conn.execute("ANALYZE background_jobs")
            conn.execute("TRUNCATE background_jobs RESTART IDENTITY CASCADE")
    return migrated_database, request.param


@pytest.fixture
def running(lock_db):
    """Two running jobs, (lower id, higher id) as (id, execution_id); the lower one's row
    rewritten so that the heap holds it after the higher one."""
    url, statistics = lock_db
    reg = Registry()

    @job("locks.noop", lease=LEASE, registry=reg)
    def noop(ctx, payload):
        raise AssertionError("driven by the test")

    with psycopg.connect(url, autocommit=True) as conn:
        # A table of a realistic size: on a tiny one a scan of it is as cheap as a lookup
        # per row, and the test would prove nothing.
        conn.execute("INSERT INTO background_jobs (queue, type, payload, status, execution_id, "
                     "lease_seconds, lease_expires_at) "
                     "SELECT 'filler', 'locks.filler', '{}', 'running', gen_random_uuid(), "
                     "3600, now() + interval '1 hour' FROM generate_series(1, %s)", [FILLER])
        for _ in range(2):
            enqueue(conn, "locks.noop", {})
        jobs = claim(conn, types=["locks.noop"], leases=[LEASE], queues=None, limit=2,
                     worker_id="worker-a")
        low, high = sorted((j.id, j.execution_id) for j in jobs)
        conn.execute("UPDATE background_jobs SET lease_expires_at = lease_expires_at + interval '1 s' "
                     "WHERE id = %s", [low[0]])
        order = [r[0] for r in conn.execute(
            "SELECT id FROM background_jobs WHERE type = 'locks.noop' ORDER BY ctid")]
        assert order == [high[0], low[0]]
        if statistics == "analyzed":
            conn.execute("ANALYZE background_jobs")
    return url, low, high


@pytest.fixture(params=SHAPES, ids=lambda s: f"{s[0] + 2}-rows-{s[1]}-plan")
def shape(request):
    return request.param


def others(count: int) -> list[tuple[int, uuid.UUID]]:
    """`count` of the filler's running jobs, with execution ids that do not own them."""
    return [(job_id, uuid.uuid4()) for job_id in range(1, count + 1)]


def assert_waits_holding_nothing_higher(url: str, low, high, statement, params,
                                        plan: str) -> None:
    with psycopg.connect(url) as holder, psycopg.connect(url) as tested, \
            psycopg.connect(url, autocommit=True) as probe:
        holder.execute("SELECT 1 FROM background_jobs WHERE id = %s FOR UPDATE", [low[0]])
        pid = tested.info.backend_pid
        if plan == "generic":
            tested.execute("SET plan_cache_mode = force_generic_plan")
        errors = []

        def run():
            try:
                # Prepared: a generic plan is made for a prepared statement only.
                tested.execute(statement, params, prepare=plan == "generic")
                tested.rollback()
            except Exception as exc:  # noqa: BLE001 - reported by the test below
                errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        try:
            wait_for(lambda: probe.execute(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                [pid]).fetchone()[0], message="the statement to wait for the lower job")
            try:
                probe.execute("SELECT 1 FROM background_jobs WHERE id = %s FOR UPDATE NOWAIT",
                              [high[0]])
            except psycopg.errors.LockNotAvailable:
                pytest.fail("the statement locked a higher job before the lowest one")
        finally:
            holder.rollback()
            thread.join(timeout=10)
        assert errors == []


def heartbeat(jobs):
    rows = [{"id": j, "execution_id": str(e), "progress": None, "checkpoint": None}
            for j, e in jobs]
    return Q.heartbeat_executions, batch_params(rows, id_key="id")


def outcomes(jobs):
    rows = [{"job_id": j, "execution_id": e, "status": "completed", "outcome": "completed",
             "error_code": None, "error": None, "delay": 0.0, "progress": None,
             "checkpoint": None} for j, e in jobs]
    return Q.finish_executions, finish_params(rows)


def hand_back(jobs):
    """A hand-back takes the same statement as a batch of outcomes, with its own rows."""
    rows = [{"job_id": j, "execution_id": e, "status": "pending", "outcome": "handed_back",
             "error_code": None, "error": None, "delay": 0.0, "progress": '{"done": 1}',
             "checkpoint": None} for j, e in jobs]
    return Q.finish_executions, finish_params(rows)


def test_a_heartbeat_locks_its_jobs_in_id_order(running, shape):
    url, low, high = running
    extra, plan = shape
    assert_waits_holding_nothing_higher(url, low, high,
                                        *heartbeat([high, low, *others(extra)]), plan)


def test_a_batch_of_outcomes_locks_its_jobs_in_id_order(running, shape):
    url, low, high = running
    extra, plan = shape
    assert_waits_holding_nothing_higher(url, low, high,
                                        *outcomes([high, low, *others(extra)]), plan)


def test_a_hand_back_locks_its_jobs_in_id_order(running, shape):
    url, low, high = running
    extra, plan = shape
    assert_waits_holding_nothing_higher(url, low, high,
                                        *hand_back([high, low, *others(extra)]), plan)


def job_scans(node: dict) -> list[dict]:
    """The nodes of an EXPLAIN (FORMAT JSON) plan that read background_jobs' rows."""
    found = [node] if (node.get("Relation Name") == "background_jobs"
                       and node["Node Type"] != "ModifyTable") else []
    for child in node.get("Plans", []):
        found += job_scans(child)
    return found


@pytest.mark.parametrize("statement", [heartbeat, outcomes, hand_back],
                         ids=lambda f: f.__name__)
def test_a_statement_reads_only_its_own_jobs(running, shape, statement):
    """Each of the statement's rows is a primary-key lookup, whatever the statistics: no
    scan reads the other workers' running jobs (a plan that walks them all also locks in
    their order, not by id)."""
    url, low, high = running
    extra, plan = shape
    sql, params = statement([high, low, *others(extra)])
    with psycopg.connect(url) as conn:
        if plan == "generic":
            # Prepared with $n and planned without its values, as the server plans a
            # statement prepared long enough.
            text, names = numbered(sql)
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE tested AS {text}")
            args = ", ".join(["%s"] * len(names))
            (explained,) = psycopg.ClientCursor(conn).execute(
                f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE tested({args})",
                [params[n] for n in names]).fetchone()
        else:
            (explained,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql,
                                        params).fetchone()
        conn.rollback()
    sent = extra + 2
    for scan in job_scans(explained[0]["Plan"]):
        read = (scan["Actual Rows"] + scan.get("Rows Removed by Filter", 0)) * scan["Actual Loops"]
        assert read <= sent, (f"{scan['Node Type']} ({scan.get('Index Name')}) read {read} "
                              f"rows for {sent} sent")
