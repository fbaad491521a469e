"""The trend chart's figures, minute by minute, against the executions and audit rows.

The clock is driven, not waited for: the dataset's rows (their rollup minutes with them)
are moved three minutes into the past, as the tables would stand three minutes after
the seeding, and one more job completes in the current minute.
"""

from __future__ import annotations

import re
from collections import Counter

import psycopg
import pytest

from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.engine.completer import Completion, write_batch
from tests.figures.conftest import LEASE, rows, take

SHIFT = "interval '3 minutes'"


@pytest.fixture
def later(seeded):
    with psycopg.connect(seeded.url) as conn:
        conn.execute(f"UPDATE job_executions SET started_at = started_at - {SHIFT}, "
                     f"finished_at = finished_at - {SHIFT}")
        conn.execute(f"UPDATE job_audit SET at = at - {SHIFT}")
        conn.execute(f"UPDATE job_minute_counts SET minute = minute - {SHIFT}")
        conn.commit()
        (one,) = take(conn, 1)
        write_batch(conn, [Completion(job_id=one.id, execution_id=one.execution_id,
                                      type=one.type, attempt=one.attempt, lease=LEASE,
                                      status=S.COMPLETED, outcome=O.COMPLETED,
                                      queue=one.queue)])
        conn.commit()
    return seeded


def outcomes_by_minute(url: str, queue: str | None,
                       job_type: str | None = None) -> tuple[Counter, object]:
    """{(minutes before the current minute, outcome): jobs} and the current minute, from
    the executions (how each ended) and the operator moves in job_audit, of one queue or
    type (or all)."""
    found = rows(url, """
        SELECT date_trunc('minute', now()), o.at, o.outcome FROM (
            SELECT e.finished_at AS at, e.queue, e.type,
                   CASE e.outcome WHEN 'retry' THEN 'retried' WHEN 'worker_lost' THEN
                        CASE WHEN j.status = 'failed' AND j.execution_id = e.execution_id
                             THEN 'failed' ELSE 'retried' END
                        ELSE e.outcome END AS outcome
            FROM job_executions e JOIN background_jobs j ON j.id = e.job_id
            WHERE e.finished_at > now() - interval '2 hours'
            UNION ALL
            SELECT a.at, j.queue, j.type, a.to_status FROM job_audit a
            JOIN background_jobs j ON j.id = a.job_id
            WHERE a.at > now() - interval '2 hours' AND a.from_status <> a.to_status
        ) o WHERE (%(queue)s::text IS NULL OR o.queue = %(queue)s::text)
              AND (%(type)s::text IS NULL OR o.type = %(type)s::text)""",
                 {"queue": queue, "type": job_type})
    now_minute = found[0][0] if found else None
    counts: Counter = Counter()
    for current, at, outcome in found:
        ago = int((current - at.replace(second=0, microsecond=0)).total_seconds() // 60)
        counts[(ago, outcome)] += 1
    return counts, now_minute


def page_minute(url: str):
    return rows(url, "SELECT date_trunc('minute', now())")[0][0]


@pytest.mark.parametrize(("queue", "job_type"), [(None, None), ("email", None),
                                                ("billing", None), (None, "report.build"),
                                                ("email", "mail.send"), ("email", "bill.charge")])
def test_each_minute_of_the_hour_shows_the_jobs_that_reached_each_outcome(
        operator, later, queue, job_type):
    for _ in range(3):  # read again if a minute began between the page and the count
        before = page_minute(later.url)
        html = operator.get("/_overview/trends", query_string={
            "range": "1h", **({"queue": queue} if queue else {}),
            **({"type": job_type} if job_type else {})}).get_data(as_text=True)
        real, minute = outcomes_by_minute(later.url, queue, job_type)
        if before == minute:
            break
    titles = re.findall(r'<rect class="hover"[^>]*><title>([^<]+)</title>', html)
    assert len(titles) == 60
    for i, title in enumerate(titles):
        ago = 60 - i  # the last point is the last full minute
        assert title == (f"1 min ending {ago} min ago: " + ", ".join(
            f"{o} {real[(ago, o)]:.1f}/min" for o in ("completed", "failed", "retried"))), ago
    this_minute = re.search(r'data-testid="this-minute">([^<]+)<', html).group(1)
    assert this_minute == ", ".join(f"{real[(0, o)]} {o}"
                                    for o in ("completed", "failed", "retried"))
    # The headline: the last 10 full minutes, per minute.
    for o in ("completed", "failed", "retried"):
        recent = sum(real[(ago, o)] for ago in range(1, 11)) / 10
        assert re.search(rf'data-testid="rate-{o}">.*?data-value="{recent:.1f}"', html, re.S), o
    assert "the last 10 full minutes vs." in html
    if job_type == "bill.charge":  # a type that is not in the queue: nothing at all
        assert not real
    if queue is None and job_type is None:  # the dataset: three minutes back, one job now
        assert real[(3, "completed")] + real[(4, "completed")] == 20
        assert sum(real[(3, o)] + real[(4, o)] for o in ("failed", "retried")) > 5
        assert real[(0, "completed")] == 1
