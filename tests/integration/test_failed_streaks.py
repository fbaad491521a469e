"""Failed groups: first seen is the current streak's start (a retry does not reset it),
and each group shows its last hour as a sparkline."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest


@pytest.fixture
def streak(engine):
    """AUTH_FAILED occurred 3 h ago, then (after a 2 h gap) for the last 40 minutes; the job
    that failed first was retried by an operator and failed again 5 minutes ago."""
    with engine.begin() as conn:
        conn.exec_driver_sql("""
            INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
            SELECT date_trunc('minute', now()) - make_interval(mins => m), 'email',
                   'send_email', 'retried', 'AUTH_FAILED', 2
            FROM generate_series(0, 40) m
            UNION ALL
            SELECT date_trunc('minute', now()) - interval '3 hours', 'email', 'send_email',
                   'failed', 'AUTH_FAILED', 1""")
        conn.exec_driver_sql("""
            INSERT INTO background_jobs (queue, type, payload, status, attempts,
                                         last_error_code, last_error, failed_at)
            VALUES ('email', 'send_email', '{}', 'failed', 4, 'AUTH_FAILED', '535',
                    now() - interval '5 minutes')""")


def test_first_seen_is_the_current_streaks_start_not_the_last_retry(viewer, streak):
    html = viewer.get("/failed").get_data(as_text=True)
    row = re.search(r'<tr data-error-code="AUTH_FAILED">(.*?)</tr>', html, re.S).group(1)
    first_seen = re.search(r'data-testid="first-seen"><time datetime="([^"]+)">([^<]+)</time> '
                           r'<span class="note">(\d+)m \d\ds ago</span>', row)
    assert first_seen, row
    seen = datetime.fromisoformat(first_seen.group(1))
    assert first_seen.group(2) == seen.strftime("%Y-%m-%d %H:%M:%S UTC")
    age = datetime.now(UTC) - seen
    # the streak began 40 minutes ago: neither 5 minutes (the last failure) nor 3 hours
    assert timedelta(minutes=38) < age < timedelta(minutes=43), first_seen.group(0)
    assert 38 <= int(first_seen.group(3)) <= 42, first_seen.group(0)
    assert 'aria-label="82 in the last hour"' in row
    points = re.search(r'<polyline points="([^"]+)"', row).group(1).split()
    assert len(points) == 60 and len({p.split(",")[1] for p in points}) == 2


#: Occurrences per (code, type), in minutes before the current one: each a job that failed
#: (or, with "r", went back to pending for a retry) with the code. The gaps: ALPHA's 180
#: minutes (ends a streak), BETA's exact hour (does not) and 61 minutes (does), GAMMA's
#: types that keep the streak only together, a week-long streak of one every 50 minutes.
PATTERN = {
    ("ALPHA", "t1"): [0, 30, 60, 90, 120, 300 + 180, 300 + 200],
    ("BETA", "t1"): [5, 65, "r125", 186, 200],
    ("GAMMA", "t1"): [0, 50],
    ("GAMMA", "t2"): ["r100", 140, 300],
    ("WEEK", "t2"): list(range(3, 7 * 24 * 60, 50)),
}


@pytest.fixture
def streaks(engine):
    """The PATTERN's jobs with one execution each, the rollup rebuilt from them; the
    streaks each code (of every type, and of each type) should show, computed here from
    the executions as the definition reads: the first minute after the last gap of more
    than an hour among the code's occurrences."""
    with engine.begin() as conn:
        for (code, job_type), minutes in PATTERN.items():
            for m in minutes:
                retried = isinstance(m, str)
                ago = int(m[1:]) if retried else m
                conn.exec_driver_sql(f"""
                    WITH at AS (SELECT date_trunc('minute', now())
                                       - make_interval(mins => {ago}) + interval '7 seconds' AS t),
                    j AS (
                        INSERT INTO background_jobs (queue, type, payload, status, attempts,
                            max_attempts, last_error_code, last_error, failed_at, created_at)
                        SELECT 'q', '{job_type}', '{{}}', '{"pending" if retried else "failed"}',
                               1, 3, '{code}', 'boom', {"NULL" if retried else "t"}, t - interval '1 minute'
                        FROM at RETURNING id)
                    INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                        worker_id, scheduled_at, started_at, finished_at, outcome, error_code,
                        error, duration_ms)
                    SELECT j.id, gen_random_uuid(), 1, 'q', '{job_type}', 'w',
                           t - interval '2 seconds', t - interval '1 second', t,
                           '{"retry" if retried else "failed"}', '{code}', 'boom', 1000
                    FROM j, at""")
        conn.exec_driver_sql("SELECT jobwarden_rollup_rebuild()")
        occurred = conn.exec_driver_sql("""
            SELECT error_code, type, date_trunc('minute', finished_at) FROM job_executions
            WHERE outcome IN ('retry', 'failed', 'unknown')""").fetchall()
        current = conn.exec_driver_sql("SELECT date_trunc('minute', now())").scalar_one()

    def start(minutes):
        minutes = sorted(minutes)
        first = minutes[0]
        for before, after in zip(minutes, minutes[1:], strict=False):
            if after - before > timedelta(hours=1):
                first = after
        return first

    expected = {}
    for job_type in (None, "t1", "t2"):
        by_code = {}
        for code, t, minute in occurred:
            if job_type in (None, t):
                by_code.setdefault(code, []).append(minute)
        expected[job_type] = {code: start(m) for code, m in by_code.items()}
    return expected, current


@pytest.mark.parametrize("job_type", [None, "t1", "t2"])
def test_first_seen_is_each_streaks_start_by_the_definition(viewer, streaks, job_type):
    html = viewer.get("/failed" + (f"?type={job_type}" if job_type else "")).get_data(
        as_text=True)
    shown = {code: datetime.fromisoformat(since) for code, since in re.findall(
        r'<tr data-error-code="([^"]+)">.*?data-testid="first-seen"><time datetime="([^"]+)"',
        html, re.S)}
    # a code shows as a failed group when it has failed jobs (of the type): GAMMA of t2
    # has one, BETA's retry alone would not make a group
    expected, current = streaks
    assert shown == expected[job_type]
    # and the definition as the PATTERN reads it, in minutes before the current one
    ago = {code: round((current - at).total_seconds() / 60) for code, at in shown.items()}
    assert ago == {None: {"ALPHA": 120, "BETA": 125, "GAMMA": 140, "WEEK": 10053},
                   "t1": {"ALPHA": 120, "BETA": 125, "GAMMA": 50},
                   "t2": {"GAMMA": 140, "WEEK": 10053}}[job_type]


def test_a_groups_times_span_only_the_types_it_lists(viewer, engine):
    """DELTA's failed jobs are all of t1 (failed 20 and 100 minutes ago); t2 has retried
    with DELTA every 10 minutes for two hours and its jobs wait for another attempt. The
    row lists t1: its streak (occurring since), last seen and last hour are t1's; that the
    code is live in t2 shows as "active now in t2"."""
    with engine.begin() as conn:
        conn.exec_driver_sql("""
            INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
            SELECT date_trunc('minute', now()) - make_interval(mins => m), 'q', 't2',
                   'retried', 'DELTA', 1
            FROM generate_series(0, 120, 10) m
            UNION ALL
            SELECT date_trunc('minute', now()) - make_interval(mins => m), 'q', 't1',
                   'failed', 'DELTA', 1
            FROM unnest(ARRAY[20, 100]) m""")
        conn.exec_driver_sql("""
            INSERT INTO background_jobs (queue, type, payload, status, attempts,
                                         last_error_code, last_error, failed_at)
            SELECT 'q', 't1', '{}', 'failed', 3, 'DELTA', 'boom',
                   date_trunc('minute', now()) - make_interval(mins => m) + interval '5 s'
            FROM unnest(ARRAY[20, 100]) m""")
        current = conn.exec_driver_sql("SELECT date_trunc('minute', now())").scalar_one()
    html = viewer.get("/failed").get_data(as_text=True)
    row = re.search(r'<tr data-error-code="DELTA">(.*?)</tr>', html, re.S).group(1)
    assert re.search(r'data-testid="group-types">t1<', row)

    def minutes_ago(testid: str) -> int:
        at = re.search(rf'data-testid="{testid}"><time datetime="([^"]+)"', row).group(1)
        return round((current - datetime.fromisoformat(at)).total_seconds() / 60)

    # t1 alone: 100 and 20 minutes ago, a gap of 80 > 60: its streak began 20 minutes ago
    # (with t2's retries in between it would have been 120)
    assert minutes_ago("first-seen") == 20
    assert minutes_ago("last-seen") == 20  # t1's latest (t2 retried this minute)
    assert 'aria-label="1 in the last hour"' in row  # t1's one failure of the hour
    assert re.search(r'data-testid="active-now" data-active-in="t2"[^>]*>active now in t2<',
                     row)
