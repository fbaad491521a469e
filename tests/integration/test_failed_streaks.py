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
