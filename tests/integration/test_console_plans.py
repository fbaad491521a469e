"""The console's pages hold without statistics: on never-analyzed tables (autovacuum may be
off, nobody runs ANALYZE) the queries that bench/bench_console.py found slow at 10,000,000
jobs keep the plans their comments promise, read from EXPLAIN (ANALYZE, BUFFERS) on
200,000 jobs. A plan chosen on default selectivities reads every failed row of a type,
walks the primary key looking for a key, scans every execution for the last hour, or reads
every minute a code occurred in; each is a bound or a plan shape below."""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from jobwarden.console.data.database import CQ, ConsoleDatabase
from jobwarden.console.data.find import SLACK
from jobwarden.worker.store.db import migrate
from jobwarden.worker.store.queries import Q
from tests.conftest import _never_autovacuumed

JOBS = 200_000
#: Every 10th job failed (type t1 or t2 alternately, 10 codes), spread over the ids.
FAILED_EVERY = 10
#: Batch 1's members: every other job among the oldest (the newest page of them is at
#: the far end of the primary key's backward walk). Every 20th job (not a failed one)
#: ended unknown, in 36 groups of type, code and verdict.
BATCH_MEMBERS = 1000

FILL = f"""
INSERT INTO background_jobs (queue, type, payload, status, attempts, max_attempts,
    created_at, started_at, completed_at, failed_at, last_error_code, last_error,
    idempotency_key, batch_id)
SELECT 'q', CASE WHEN f THEN 't' || (1 + g / {FAILED_EVERY} % 2) ELSE 'other' END,
       jsonb_build_object('n', g), CASE WHEN f THEN 'failed' ELSE 'completed' END, 1, 3,
       t, t, CASE WHEN NOT f THEN t END, CASE WHEN f THEN t END,
       CASE WHEN f THEN 'CODE_' || (g / {FAILED_EVERY} / 2 % 10) END,
       CASE WHEN f THEN 'boom' END, 'key-' || g,
       CASE WHEN g <= 2 * {BATCH_MEMBERS} AND g % 2 = 1 THEN 1 END
FROM generate_series(1, {JOBS}) g
CROSS JOIN LATERAL (SELECT g % {FAILED_EVERY} = 0 AS f,
                           now() - ({JOBS} - g) * interval '3 seconds' AS t) x;
INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
    scheduled_at, started_at, finished_at, outcome, error_code, duration_ms)
SELECT id, gen_random_uuid(), 1, queue, type, 'w', started_at, started_at,
       started_at + interval '1 second', status, last_error_code, 1000
FROM background_jobs;
-- 10,000 of the completed jobs, every 20th, ended unknown instead: 2 types, 5 codes and
-- none, 3 verdicts (Needs review's groups), spread over every heap page
UPDATE background_jobs
SET status = 'unknown', completed_at = NULL, type = 'u' || (id / 20 % 2),
    last_error_code = CASE WHEN id / 40 % 6 = 5 THEN NULL ELSE 'UCODE_' || (id / 40 % 6) END,
    reconcile_verdict = (ARRAY[NULL, 'unknown', 'error'])[1 + id / 240 % 3]
WHERE id % 20 = 7;
-- 300 running jobs (the fleet's slots), the newest: the counts read them apart
INSERT INTO background_jobs (queue, type, payload, status, attempts, execution_id,
    worker_id, started_at, lease_expires_at)
SELECT 'q', 'other', '{{}}', 'running', 1, gen_random_uuid(), 'w', now(),
       now() + interval '1 hour'
FROM generate_series(1, 300);
-- a week of every code failing every minute, of both types
INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
SELECT date_trunc('minute', now()) - make_interval(mins => m), 'q', 't' || (1 + m % 2),
       'failed', 'CODE_' || c, 1
FROM generate_series(0, 7 * 24 * 60) m, generate_series(0, 9) c;
"""


@pytest.fixture(scope="module")
def never_analyzed(server_url):
    """A database of its own for the module: filled once, never analyzed."""
    name = f"jobwarden_plans_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(server_url)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
    try:
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            # The history's partitions hold its rows (its parent has no pages of its own).
            weeks = [name for (name,) in conn.execute(
                "SELECT name FROM jobwarden_execution_partitions()")]
            # Even on a server with autovacuum on, these tables keep no statistics.
            _never_autovacuumed(url)
            conn.execute(FILL)
            # A plain VACUUM sets the visibility map (index-only scans), no statistics. It
            # leaves a page it cannot lock for cleanup as it was (pinned then by another
            # process, a checkpoint writing it out): CI once had 101 pages of the
            # unknown jobs not all-visible, and the index-only plans read them. Again
            # until every page is all-visible, which the tests below count on.
            tables = ["background_jobs", *weeks, "job_minute_counts"]
            for _ in range(5):
                conn.execute("VACUUM background_jobs, job_executions, job_minute_counts")
                behind = conn.execute(
                    "SELECT array_agg(relname) FROM pg_class "
                    "WHERE relname = ANY(%s) AND relallvisible < relpages",
                    [tables]).fetchone()[0]
                if not behind:
                    break
            assert not behind, f"pages of {behind} stay not all-visible after 5 VACUUMs"
            analyzed = conn.execute("SELECT count(*) FROM pg_stats WHERE tablename IN "
                                    "('background_jobs', 'job_executions', "
                                    "'job_minute_counts')").fetchone()[0]
        assert analyzed == 0, "the tables must have no statistics for this test to mean anything"
        yield url
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def explain(url: str, query, **params) -> tuple[int, str]:
    """EXPLAIN (ANALYZE, BUFFERS) of a console query (or a runtime's, whose Query is its
    text): (shared buffers hit + read, the plan as JSON text)."""
    with psycopg.connect(url, prepare_threshold=None) as conn:
        (plan,) = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
                               + getattr(query, "sql", query),
                               params).fetchone()
    top = plan[0]["Plan"]
    return top["Shared Hit Blocks"] + top["Shared Read Blocks"], json.dumps(plan)


def nodes(plan: str) -> list[dict]:
    found = []

    def walk(node):
        found.append(node)
        for child in node.get("Plans", []):
            walk(child)

    walk(json.loads(plan)[0]["Plan"])
    return found


def assert_jobs_read_through(plan: str, index: str) -> None:
    """The plan reads background_jobs through `index` alone, with no scan of the table."""
    read = [n for n in nodes(plan) if n.get("Relation Name") == "background_jobs"
            or n.get("Index Name", "").startswith("background_jobs")]
    assert read and not [n for n in read if n["Node Type"] == "Seq Scan"], plan
    assert {n["Index Name"] for n in read if "Index Name" in n} == {index}, plan


NO_RANGE = {"created_from": None, "created_to": None, "from_id": None, "to_id": None}
JOBS_PAGE = {"status": None, "queue": None, "type": None, "error_code": None,
             "search_key": None, "search_id": None, "before_id": None, "after_id": None,
             "limit": 51, "flow_ids": None, "batch": None, **NO_RANGE}


def test_a_types_failed_groups_come_from_the_failed_by_type_index(never_analyzed):
    # 10,000 failed jobs of t1, one in every 20 jobs: their rows are on every heap page.
    buffers, plan = explain(never_analyzed, CQ.console_failed_groups, type="t1", limit=500)
    assert "background_jobs_failed_by_type_idx" in plan
    assert not [n for n in nodes(plan) if n["Node Type"] in ("Bitmap Heap Scan", "Seq Scan")]
    assert buffers < 300, plan


def test_a_types_failed_codes_and_jobs_come_from_the_index(never_analyzed):
    buffers, plan = explain(never_analyzed, CQ.console_failed_type_codes, type="t1")
    assert "background_jobs_failed_by_type_idx" in plan and buffers < 200, plan
    for code in (None, "CODE_3"):
        buffers, plan = explain(never_analyzed, CQ.console_jobs_page,
                                **{**JOBS_PAGE, "status": "failed", "type": "t1",
                                   "error_code": code})
        # the page's 51 rows and the index; not the rows of every failed job of t1
        assert buffers < 400, (code, plan)


def test_a_codes_newest_failed_jobs_are_a_walk_of_the_index(never_analyzed):
    # CODE_3 has 1,000 failed jobs over every heap page; the page needs 51 of them
    buffers, plan = explain(never_analyzed, CQ.console_jobs_page,
                            **{**JOBS_PAGE, "status": "failed", "error_code": "CODE_3"})
    assert "background_jobs_failed_code_id_idx" in plan and buffers < 300, plan


def test_a_key_search_looks_the_key_up(never_analyzed):
    buffers, plan = explain(never_analyzed, CQ.console_jobs_page,
                            **{**JOBS_PAGE, "search_key": "key-1234"})
    assert buffers < 30, plan
    buffers, plan = explain(never_analyzed, CQ.console_search, job_id=None, key="key-1234",
                            path=None, values=None, pattern=None, limit=51, top=None,
                            floor=None, flow_ids=None, batch=None, **NO_RANGE)
    assert buffers < 30, plan


def test_an_old_batchs_members_are_read_through_its_index(never_analyzed):
    """Its 1,000 members are the oldest jobs: a walk of the primary key backwards, hoping
    to meet 51 of them soon, would read nearly every job first."""
    buffers, plan = explain(never_analyzed, CQ.console_jobs_page, **{**JOBS_PAGE, "batch": 1})
    assert "background_jobs_batch_idx" in plan and buffers < 300, plan
    buffers, plan = explain(never_analyzed, CQ.console_search, job_id=None, key=None,
                            path=None, values=None, pattern=None, limit=51, top=None,
                            floor=None, flow_ids=None, batch=1, **NO_RANGE)
    assert "background_jobs_batch_idx" in plan and buffers < 300, plan


@pytest.mark.parametrize("job_type", [None, "t1"])
def test_a_streak_is_walked_by_index_probes(never_analyzed, job_type):
    # each code's group lists the types its failed jobs have (both, or the one asked for)
    types = json.dumps({f"CODE_{c}": [job_type] if job_type else ["t1", "t2"]
                        for c in range(10)})
    _buffers, plan = explain(never_analyzed, CQ.failed_group_streaks,
                             codes=[f"CODE_{c}" for c in range(10)], type=job_type,
                             types=types)
    shapes = {n["Node Type"] for n in nodes(plan)}
    # every minute of a week in 10 codes is 100,800 rows: a plan that reads them sorts
    # them (by hour) or bitmaps them; the walk probes the index once per hour a code
    assert not shapes & {"Sort", "Bitmap Heap Scan", "Seq Scan", "Incremental Sort"}, plan
    probes = [n for n in nodes(plan) if n.get("Index Name") == "job_minute_counts_error_idx"]
    assert probes and max(n["Actual Loops"] for n in probes) <= 10 * (7 * 24 + 2), plan


@pytest.mark.parametrize("query", ["console_sla_histograms", "console_sla_wait_buckets"])
def test_the_sla_page_reads_the_hour_of_the_timings_rollup_not_the_executions(
        never_analyzed, query):
    """Migration 0086: the SLA page's cost is the rollup's hour (bounded by its buckets),
    whatever the number of executions in it."""
    buffers, plan = explain(never_analyzed, getattr(CQ, query))
    relations = {n.get("Relation Name") for n in nodes(plan)} - {None}
    assert relations == {"job_timings", "background_jobs"}, plan
    # through its key, whose first column is the period (an index or bitmap scan)
    assert not [n for n in nodes(plan) if n["Node Type"] == "Seq Scan"
                and n.get("Relation Name") == "job_timings"], plan
    assert any(n.get("Index Name") == "job_timings_pkey" for n in nodes(plan)), plan
    assert buffers < 100, plan


@pytest.mark.parametrize("query", ["metrics_executions_recent", "metrics_duration_histogram",
                                   "metrics_time_to_start_histogram", "alerts_queue_flow",
                                   "console_queue_waits"])
def test_a_trailing_window_of_executions_reads_the_window(never_analyzed, query):
    # the fill's executions run 3 s apart: the last hour holds 1,200 of 200,000. The
    # windows of starts read the finish index (the history keeps none on started_at).
    params = ({"negated_bounds": [-60.0, -1.0]} if "histogram" in query
              else {"queues": ["q"]} if query == "console_queue_waits" else {})
    buffers, plan = explain(never_analyzed, getattr(CQ, query), **params)
    # (A week made ahead is empty: its scan reads no page. Its cost is no sign of that:
    # PostgreSQL 16 costs an empty partition's scan at 0.01, 15 at 0.)
    assert not [n for n in nodes(plan) if n["Node Type"] == "Seq Scan"
                and n["Shared Hit Blocks"] + n["Shared Read Blocks"] > 0], plan
    assert buffers < 1_500, plan
    # The planner knows the window is narrow: a one-sided range reads to it as a third of
    # the table (here 66,667 rows, still an index; at 10,000,000 jobs a parallel scan of
    # every execution with JIT).
    scans = [n for n in nodes(plan)  # the history's partitions (migration 0066)
             if n.get("Relation Name", "").startswith("job_executions")]
    assert scans and max(n["Plan Rows"] for n in scans) <= JOBS // 100, plan


def test_a_limits_current_rate_reads_the_last_seconds_of_executions(never_analyzed):
    # A live limit on the fill's queue: its rate counts the executions started in the
    # last 10 seconds, through the finish index (the history keeps none on started_at),
    # not a scan of every week's executions. Rolled back: the module's data stays.
    with psycopg.connect(never_analyzed, prepare_threshold=None) as conn:
        conn.execute("INSERT INTO job_limit_controls (scope, name, rate, reason, set_by, "
                     "set_role) VALUES ('queue', 'q', 5, 'plan', 'test', 'admin')")
        (plan,) = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
                               + CQ.console_limits.sql, {"scope": None, "name": None}
                               ).fetchone()
        conn.rollback()
    plan = json.dumps(plan)
    scans = [n for n in nodes(plan) if n.get("Relation Name", "").startswith("job_executions")]
    assert scans and not [n for n in scans if n["Node Type"] == "Seq Scan"
                          and n["Shared Hit Blocks"] + n["Shared Read Blocks"] > 0], plan
    assert max(n["Plan Rows"] for n in scans) <= JOBS // 100, plan


def test_the_consoles_transactions_plan_without_jit_and_leave_the_session_alone(clean_db):
    db = ConsoleDatabase(clean_db, pool_size=1)
    try:
        with db.engine.connect() as raw:
            server_default = raw.exec_driver_sql("SHOW jit").scalar_one()
        with db.reading() as reader:
            assert reader.conn.exec_driver_sql("SHOW jit").scalar_one() == "off"
        with db.transaction() as reader:
            assert reader.conn.exec_driver_sql("SHOW jit").scalar_one() == "off"
        # the same pooled connection, outside the console's transactions: as it was
        # (a pooler in transaction mode hands it to other clients)
        with db.engine.connect() as raw:
            assert raw.exec_driver_sql("SHOW jit").scalar_one() == server_default
    finally:
        db.dispose()


def _ids_at(url: str, *moments) -> list[int]:
    with psycopg.connect(url) as conn:
        return [r[1] for r in conn.execute(CQ.console_ids_at.sql,
                                           {"moments": list(moments)}).fetchall()]


def test_where_a_time_falls_among_the_ids_is_a_few_probes(never_analyzed):
    """Halving the ids: one probe of the primary key per step, whatever the table's size;
    never a read of the jobs in between (console/data/find.py)."""
    with psycopg.connect(never_analyzed) as conn:
        old, new = conn.execute("SELECT created_at FROM background_jobs WHERE id IN (4242, "
                                "190000) ORDER BY id").fetchall()
    buffers, plan = explain(never_analyzed, CQ.console_ids_at, moments=[old[0], new[0]])
    assert not [n for n in nodes(plan) if n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan")]
    # 2 moments × at most 2 log2(200,000) ≈ 36 probes of a few pages each
    assert buffers < 2 * 36 * 5, plan
    assert _ids_at(never_analyzed, old[0], new[0]) == [4242, 190000]


def explain_walk(url: str, query, **params) -> tuple[int, str]:
    """`explain` with the planner's sorts off, as a page of a time range runs
    (console/data/queries.py, jobs_page)."""
    with psycopg.connect(url, prepare_threshold=None) as conn:
        conn.execute(CQ.console_sort_setting.sql, {"value": "off"})
        (plan,) = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query.sql,
                               params).fetchone()
    top = plan[0]["Plan"]
    return top["Shared Hit Blocks"] + top["Shared Read Blocks"], json.dumps(plan)


#: Filters of the jobs list, with a time range: none, a failed job's, a failed code's,
#: the most common status, a type of every 20th job, an old batch's members.
RANGE_FILTERS = [{}, {"status": "failed"}, {"status": "failed", "error_code": "CODE_3"},
                 {"status": "completed"}, {"type": "t1"}, {"batch": 1}]


@pytest.mark.parametrize("filters", RANGE_FILTERS)
@pytest.mark.parametrize("first, last", [(4000, 5200), (1000, 199000)])
def test_a_time_range_is_a_walk_of_its_ids(never_analyzed, filters, first, last):
    """Job #4242's hour at the far end of 200,000 newer jobs, or nearly every job: the
    page walks the range's ids in order from its top (the primary key, or a failed code's
    or status's index), never the jobs created since, nor the whole range to sort it."""
    with psycopg.connect(never_analyzed) as conn:
        (start,), (end,) = conn.execute("SELECT created_at FROM background_jobs WHERE id IN "
                                        "(%s, %s) ORDER BY id", (first, last)).fetchall()
    from_id, to_id = _ids_at(never_analyzed, start - SLACK, end + SLACK)
    params = {**JOBS_PAGE, **filters, "created_from": start, "created_to": end,
              "from_id": from_id, "to_id": to_id}
    if filters.get("batch"):  # its members by its index, the range a filter (jobs_page)
        buffers, plan = explain(never_analyzed, CQ.console_jobs_page, **params)
        assert "background_jobs_batch_idx" in plan and buffers < 1_000, plan
        return
    buffers, plan = explain_walk(never_analyzed, CQ.console_jobs_page, **params)
    assert not [n for n in nodes(plan) if n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan",
                                                             "Sort")], plan
    # a page of 51 (every 20th job for t1: about 1,000 rows), the margin's 100 jobs above
    # the range, their index pages; a sort of the whole range read 9,000 pages
    assert buffers < 1_000, plan


@pytest.mark.parametrize("query, params", [
    ("console_suggest_names", {"limit": 200}),
    ("console_suggest_codes", {"limit": 200}),
    ("console_suggest_payload_paths", {"sample": 500, "max_bytes": 8192, "depth": 3,
                                       "limit": 200}),
])
def test_the_filters_suggestions_read_no_jobs_but_a_bounded_few(never_analyzed, query,
                                                                params):
    """Names from the catalogue and the rollup, codes by a skip over the failed jobs' and
    the rollup's code indexes (10 codes: a few probes each, not 20,000 failed jobs nor a
    week of minutes), paths from the newest 500 payloads (console/data/suggest.py)."""
    buffers, plan = explain(never_analyzed, getattr(CQ, query), **params)
    scans = [n for n in nodes(plan) if n.get("Relation Name") == "background_jobs"]
    assert not [n for n in scans if n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan")], plan
    if query == "console_suggest_names":
        assert not scans, plan
    assert buffers < 800, plan


def test_needs_reviews_groups_come_from_the_unknown_jobs_index(never_analyzed):
    """10,000 unknown jobs over every heap page: their groups are counted from the index
    of migration 0077 alone, never from their rows."""
    buffers, plan = explain(never_analyzed, CQ.console_unknown_groups, limit=500)
    assert "background_jobs_unknown_idx" in plan, plan
    assert not [n for n in nodes(plan) if n["Node Type"] in (
        "Seq Scan", "Bitmap Heap Scan", "Index Scan")], plan
    assert buffers < 200, plan


UNKNOWN_JOBS = {"type": None, "error_code": None, "no_code": False, "verdict": None,
                "no_verdict": False, "before_id": None, "limit": 51}


@pytest.mark.parametrize("group", [
    {}, {"type": "u1", "error_code": "UCODE_3", "no_verdict": True},
    {"type": "u0", "no_code": True, "verdict": "error"}])
def test_a_groups_newest_cards_come_from_an_index(never_analyzed, group):
    """A group's 280 jobs (or every unknown job), the newest 51 of them: their ids from an
    index of unknown jobs alone (a group's sorted there: its entries, not its rows), then
    the 51 rows and each one's latest execution (a probe of each weekly partition) — not
    the rows of the other unknown jobs, nor of every job."""
    buffers, plan = explain(never_analyzed, CQ.console_unknown_jobs,
                            **{**UNKNOWN_JOBS, **group})
    jobs = [n for n in nodes(plan) if n.get("Relation Name") == "background_jobs"]
    assert not [n for n in jobs if n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan")], plan
    ids = [n for n in jobs if n["Node Type"] == "Index Only Scan"]
    assert ids and ids[0]["Index Name"] in ("background_jobs_unknown_idx",
                                            "background_jobs_settled_status_idx"), plan
    rows = [n for n in jobs if n["Node Type"] == "Index Scan"]
    assert rows and max(n["Actual Loops"] for n in rows) <= 51, plan
    assert buffers < 1_200, plan


@pytest.mark.parametrize(("hours", "bucket_s", "most"), [(24, 300, 1_600),
                                                    (7 * 24, 3600, 10_500)])
def test_a_types_durations_are_an_index_only_scan_of_that_type(never_analyzed, hours,
                                                               bucket_s, most):
    # t1 is one job in 20: its 1,440 executions of a day (10,000 of the week) lie among
    # 28,800 (200,000) of every type
    with psycopg.connect(never_analyzed) as conn:
        (last,) = conn.execute("SELECT floor(extract(epoch FROM now()) / %s)::bigint",
                               [bucket_s]).fetchone()
    buckets = hours * 3600 // bucket_s
    buffers, plan = explain(never_analyzed, CQ.console_type_durations, type="t1",
                            bucket_s=bucket_s, first=last - buckets + 1, last=last)
    # (An empty partition's scan reads no page, whatever its plan: the range reaches the
    # partition before the first week on some days, such as a Sunday's week back.)
    scans = [n for n in nodes(plan) if n.get("Relation Name", "").startswith("job_executions")
             and n["Actual Loops"] > 0 and n["Shared Hit Blocks"] + n["Shared Read Blocks"]]
    assert scans and {n["Node Type"] for n in scans} == {"Index Only Scan"}, plan
    assert all("type" in n["Index Name"] and n["Heap Fetches"] == 0 for n in scans), plan
    # the type's rows of the range and no other: each bucket one probe of the index
    assert sum(n["Actual Rows"] * n["Actual Loops"] for n in scans) < most, plan
    assert buffers < buckets * 4 + most // 50, plan


def test_the_counts_read_running_jobs_through_their_partial_index(never_analyzed):
    """The count rollup holds running jobs in pending (migration 0094): the overview's
    counts take them from the partial index of running jobs (at most the fleet's slots),
    never from a scan of 200,000 finished jobs."""
    buffers, plan = explain(never_analyzed, CQ.console_counts_by_queue_type)
    assert_jobs_read_through(plan, "background_jobs_lease_idx")
    assert buffers < 50, plan


def test_recovery_finds_expired_leases_through_the_partial_index_of_running_jobs(
        never_analyzed):
    """Not a page, on the same never-analyzed table: every worker's recovery pass looks
    for expired leases (several times a pass while its batches come back full) through
    the lease index of running jobs, never a scan of 200,000 finished ones."""
    buffers, plan = explain(never_analyzed, Q.lock_stale_running, limit=500)
    assert_jobs_read_through(plan, "background_jobs_lease_idx")
    assert buffers < 50, plan


def test_the_navigations_badges_read_the_rollup_alone(never_analyzed):
    """Every signed-in page's badges (failed, needs review): never a read of the jobs, so a
    page renders while background_jobs is locked."""
    _, plan = explain(never_analyzed, CQ.console_status_totals)
    assert {n["Relation Name"] for n in nodes(plan) if "Relation Name" in n} == {
        "job_count_deltas"}, plan
