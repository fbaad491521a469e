"""The timings rollup (migration 0086) behind the SLA page: kept by the history's trigger
whatever writes it, bounded against hostile values, pruned, and read by the page."""

from __future__ import annotations

import math

import pytest

from jobwarden import RetryableError, RetryPolicy, enqueue, job
from jobwarden.console.data.sla import percentile, upper_ms
from tests.helpers import running_worker, wait_for

INSERT = """
INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                            scheduled_at, started_at, finished_at, outcome, duration_ms)
"""

#: The rollup's rows, as the trigger left them.
TIMINGS = """SELECT period, queue, type, measure, bucket, executions, raised, max_ms
             FROM job_timings ORDER BY 1, 2, 3, 4, 5"""


def real_histograms(conn) -> dict:
    """(type, measure, bucket) -> executions, counted over the history here in Python."""
    out: dict = {}
    for type_, wait_ms, run_ms in conn.execute(
            "SELECT type, extract(epoch FROM started_at - scheduled_at)::float8 * 1000, "
            "duration_ms FROM job_executions WHERE finished_at IS NOT NULL"):
        for measure, ms in (("wait", wait_ms), ("run", run_ms)):
            if ms is None:
                continue
            bucket = 0 if not ms >= 1 else min(400, 1 + math.floor(8 * math.log2(ms)))
            out[(type_, measure, bucket)] = out.get((type_, measure, bucket), 0) + 1
    return out


def rollup_histograms(conn) -> dict:
    return {(t, m, b): n for t, m, b, n in conn.execute(
        "SELECT type, measure, bucket, sum(executions) FROM job_timings GROUP BY 1, 2, 3")}


def test_a_real_workers_executions_are_in_the_rollup_as_in_the_history(
        conn, clean_db, default_registry):
    calls = {"n": 0}

    @job("timed.flaky", registry=default_registry, max_attempts=3,
         backoff=RetryPolicy(base=0.05, cap=0.05, jitter=0))
    def flaky(ctx, payload):
        calls["n"] += 1
        if payload["i"] % 3 == 0 and ctx.attempt == 1:
            raise RetryableError("try again", code="FLAKY")

    for i in range(30):
        enqueue(conn, "timed.flaky", {"i": i}, registry=default_registry)
    conn.commit()
    with running_worker(default_registry, clean_db):
        wait_for(lambda: conn.execute(
            "SELECT count(*) = 30 FROM background_jobs WHERE status = 'completed'"
        ).fetchone()[0] or conn.rollback(), timeout=60, message="the jobs to complete")
    conn.rollback()
    assert rollup_histograms(conn) == real_histograms(conn)
    raised, executions = conn.execute(
        "SELECT sum(raised), sum(executions) FROM job_timings WHERE measure = 'wait'").fetchone()
    assert (raised, executions) == (10, 40)


def test_a_statement_across_partitions_and_a_closed_open_row_count_once(conn, clean_db):
    """One statement's rows land in this week's partition and the default (a week
    before the first partition); a row opened by an older runtime (no finished_at: the
    default) counts when closed, moving to this week's, and a later edit of a finished
    row does not count it again."""
    conn.execute(INSERT + """
        SELECT g, gen_random_uuid(), 1, 'q', 't', 'w', at - interval '2 s', at, at,
               'completed', 10
        FROM generate_series(1, 6) g,
             LATERAL (SELECT now() - (g % 2) * interval '8 days' AS at) a""")
    conn.execute(INSERT.replace("finished_at, outcome, duration_ms", "finished_at")
                 + "VALUES (99, gen_random_uuid(), 1, 'q', 't', 'w', now() - interval '3 s', "
                   "now(), NULL)")
    conn.commit()
    assert conn.execute("SELECT count(DISTINCT tableoid) FROM job_executions").fetchone()[0] == 2
    assert conn.execute("SELECT sum(executions) FROM job_timings "
                        "WHERE measure = 'wait'").fetchone()[0] == 6
    conn.execute("UPDATE job_executions SET finished_at = now(), outcome = 'failed', "
                 "duration_ms = 5 WHERE job_id = 99")
    conn.execute("UPDATE job_executions SET error = 'edited' WHERE job_id <= 6")
    conn.commit()
    assert rollup_histograms(conn) == real_histograms(conn)
    assert conn.execute("SELECT sum(raised) FROM job_timings "
                        "WHERE measure = 'run'").fetchone()[0] == 1


@pytest.mark.parametrize("duration", ["'Infinity'", "'-Infinity'", "'NaN'", "1e300", "-5",
                                      "0", "0.5"])
def test_hostile_times_land_in_a_bounded_bucket_and_the_page_renders(
        operator, conn, clean_db, duration):
    """A duration or wait no clock gives (infinite, NaN, astronomically large, negative:
    a clock that went back) is counted in bucket 0 or 400, never an error that would fail
    the statement finishing the execution."""
    conn.execute(INSERT + f"""
        VALUES (1, gen_random_uuid(), 1, 'q', 'odd', 'w', now() + interval '5 s', now(),
                now(), 'completed', {duration}::float8),
               (2, gen_random_uuid(), 1, 'q', 'odd', 'w', now() - interval '300 years',
                now(), now(), 'completed', 1)""")
    conn.commit()
    buckets = [b for (b,) in conn.execute("SELECT bucket FROM job_timings")]
    assert buckets and all(0 <= b <= 400 for b in buckets)
    page = operator.get("/sla")
    assert page.status_code == 200 and b'data-type="odd"' in page.data


def test_a_start_in_the_future_counts_in_the_hour_and_in_no_interval(operator, conn, clean_db):
    """Clock skew: an execution whose start is ahead of the database's clock (a row
    written by hand, a restored clock) is one of the hour's started executions, and of no
    5-minute interval (none is ahead of now): the page still renders its 12."""
    conn.execute(INSERT + """
        VALUES (1, gen_random_uuid(), 1, 'q', 'ahead', 'w', now() + interval '1 hour',
                now() + interval '1 hour', now() + interval '2 hours', 'completed', 3)""")
    conn.commit()
    card = operator.get("/sla").get_data(as_text=True).split('data-type="ahead"')[1]
    assert "0 of 1 finished executions, 1 started" in card
    assert "0 of 12 five-minute intervals" in card


def test_the_trigger_and_the_rebuild_agree_and_truncate_empties_the_rollup(conn, clean_db):
    conn.execute(INSERT + """
        SELECT g, gen_random_uuid(), 1, 'q' || g % 2, 't' || g % 3, 'w',
               now() - g * interval '7 s', now() - g * interval '3 s',
               now() - g * interval '2 s', 'completed', g * 13.7
        FROM generate_series(1, 300) g""")
    conn.commit()
    kept = conn.execute(TIMINGS).fetchall()
    conn.execute("SELECT jobwarden_timings_rebuild()")
    conn.commit()
    assert conn.execute(TIMINGS).fetchall() == kept
    conn.execute("TRUNCATE job_executions")
    conn.commit()
    assert conn.execute("SELECT count(*) FROM job_timings").fetchone()[0] == 0


def test_the_fold_drops_periods_older_than_two_days(conn, clean_db):
    conn.execute("""INSERT INTO job_timings (period, queue, type, measure, bucket,
                                             executions, raised, max_ms)
                    VALUES (jobwarden_timing_period(now()) - interval '3 days', 'q', 't',
                            'wait', 1, 1, 0, 1),
                           (jobwarden_timing_period(now()) - interval '1 day', 'q', 't',
                            'wait', 1, 1, 0, 1)""")
    conn.execute("SELECT jobwarden_rollup_fold()")
    conn.commit()
    assert conn.execute("SELECT count(*) FROM job_timings").fetchone()[0] == 1


def test_an_empty_hour_and_range_parameters_change_nothing(operator, conn, clean_db):
    """The page has no range to pass: parameters in the address are ignored, and an hour
    with no execution shows no percentile (a type with a target still has its card)."""
    conn.execute("INSERT INTO job_types (type, queue, max_attempts, lease_seconds, backoff, "
                 "sla_seconds, version, repeat_safe, published_by) "
                 "VALUES ('quiet', 'q', 5, 60, '{}', 30, 1, true, 'w')")
    conn.commit()
    plain = operator.get("/sla")
    odd = operator.get("/sla?range=-1&minutes=99999999999&since=1970-01-01&bucket=1e308")
    assert plain.status_code == odd.status_code == 200
    assert b'data-type="quiet"' in plain.data
    assert b'data-testid="over-target">0<' in plain.data
    assert b'data-value="None" data-testid="wait-p99"' in plain.data


def test_a_percentile_is_its_buckets_upper_edge_by_nearest_rank():
    assert percentile([], 0.5) is None
    assert percentile([(3, 1)], 0.99) == upper_ms(3)
    # 100 executions: p95 is the 95th (bucket 10), p99 the 99th (bucket 20)
    histogram = [(10, 95), (20, 4), (30, 1)]
    assert percentile(histogram, 0.95) == upper_ms(10)
    assert percentile(histogram, 0.99) == upper_ms(20)
    assert percentile(histogram, 0.5) == upper_ms(10)
    assert upper_ms(0) == 1.0 and upper_ms(8) == 2.0
