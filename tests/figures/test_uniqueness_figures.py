"""The figures of uniqueness and expiry (docs/guide/uniqueness.md): a job page's folded
enqueues and deadline, the overview's expired jobs, the Failed group EXPIRED and the
/metrics counter, each against SQL over `background_jobs` and `job_folds` written here."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import psycopg
import pytest

from jobwarden import JobSpec, enqueue, enqueue_many
from jobwarden.worker.duties.expiry import expire
from tests.figures.conftest import rows
from tests.figures.html_tree import page
from tests.figures.test_metrics_and_alerts import metric

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


def test_a_jobs_page_counts_the_enqueues_folded_into_it(operator, clean_db):
    with psycopg.connect(clean_db) as conn:
        for edit in range(6):
            debounced = enqueue(conn, "doc.index", {"edit": edit}, unique_key="doc:1",
                                replace=True, delay=600)
        for _ in range(3):
            windowed = enqueue(conn, "digest", {}, unique_key="digest:u1", unique_for="1h")
        keyed = [enqueue(conn, "mail", {}, idempotency_key="welcome:1") for _ in range(2)]
        plain = enqueue(conn, "mail", {}, expires_at=datetime(2100, 1, 1, tzinfo=UTC))
        conn.commit()
    assert keyed[0] == keyed[1]
    real = {job_id: rows(clean_db, "SELECT count(*), count(*) FILTER (WHERE replaced) "
                                   "FROM job_folds WHERE job_id = %s", [job_id])[0]
            for job_id in (debounced, windowed, keyed[0], plain)}
    assert real == {debounced: (5, 5), windowed: (2, 0), keyed[0]: (1, 0), plain: (0, 0)}
    for job_id, (folded, replacing) in real.items():
        doc = page(operator, f"/jobs/{job_id}")
        shown = doc.one("job-folds").text()
        assert int(shown.split()[0]) == folded
        assert (f"({replacing} replaced its payload)" in shown) == bool(replacing)
        (key, expires_at) = rows(clean_db, "SELECT unique_key, expires_at FROM background_jobs "
                                           "WHERE id = %s", [job_id])[0]
        assert doc.one("unique-key").text() == (key or "—")
        deadline = doc.one("job-deadline")
        assert deadline.time() == (expires_at.isoformat() if expires_at else None)


@pytest.fixture
def expired(clean_db) -> str:
    """Expired jobs of two types, one of them ended over an hour ago, and a job retried
    after it expired (failed no more)."""
    with psycopg.connect(clean_db) as conn:
        enqueue_many(conn, [JobSpec("mail", {}, expires_at=LONG_AGO) for _ in range(3)]
                     + [JobSpec("report", {}, expires_at=LONG_AGO) for _ in range(2)]
                     + [JobSpec("mail", {})])
        conn.commit()
    with psycopg.connect(clean_db, autocommit=True) as conn:
        assert expire(conn) == 5
        conn.execute("UPDATE background_jobs SET failed_at = now() - interval '2 hours' "
                     "WHERE id = (SELECT min(id) FROM background_jobs WHERE type = 'report')")
        conn.execute("UPDATE background_jobs SET status = 'pending', failed_at = NULL, "
                     "expires_at = NULL WHERE id = (SELECT min(id) FROM background_jobs)")
    return clean_db


def test_the_overview_counts_the_jobs_expired_in_the_last_hour(operator, expired):
    html = operator.get("/").get_data(as_text=True)
    shown = re.search(r'data-testid="expired-last-hour">(\d+)<', html).group(1)
    (real,) = rows(expired, "SELECT count(*) FROM background_jobs WHERE status = 'failed' "
                            "AND last_error_code = 'EXPIRED' "
                            "AND failed_at > now() - interval '1 hour'")[0]
    assert int(shown) == real == 3


def test_failed_groups_expired_jobs_under_their_code(operator, expired):
    html = operator.get("/failed").get_data(as_text=True)
    (real,) = rows(expired, "SELECT count(*) FROM background_jobs WHERE status = 'failed' "
                            "AND last_error_code = 'EXPIRED'")[0]
    row = re.search(r'<tr[^>]*data-error-code="EXPIRED"[^>]*>(.*?)</tr>', html, re.S)
    assert row is not None, "no EXPIRED group on Failed"
    assert re.search(rf">\s*{real}\s*<", row.group(1)), row.group(1)


def test_metrics_count_expired_jobs_by_type(operator, expired):
    """A counter: the retried job stays counted; the rows record every expiry."""
    scrape = operator.get("/metrics").get_data(as_text=True)
    shown = metric(scrape, "jobwarden_expired_total", "type")
    real = dict(rows(expired, "SELECT type, count(*) FROM background_jobs "
                              "WHERE last_error_code = 'EXPIRED' OR id = "
                              "(SELECT min(id) FROM background_jobs) GROUP BY type"))
    assert {k: v for k, v in shown.items() if v} == {(t,): float(n) for t, n in real.items()}


def test_the_rollups_count_expired_jobs_as_failed_and_a_rebuild_agrees(expired):
    """Expired jobs that never ran: the trigger counts each among the minute's failed
    outcomes, code EXPIRED, and a rebuild from the records finds them alike."""
    from tests.figures.test_rollup_rebuild import count_deltas, minute_counts

    live, counts = minute_counts(expired), count_deltas(expired)
    failed = {k: n for k, n in live.items() if k[3] == "failed"}
    assert {(k[2], k[4]): n for k, n in failed.items()} == {("mail", "EXPIRED"): 3,
                                                            ("report", "EXPIRED"): 2}
    with psycopg.connect(expired) as conn:
        conn.execute("UPDATE background_jobs SET failed_at = now() WHERE failed_at IS NOT NULL")
        conn.commit()
        conn.execute("SELECT jobwarden_rollup_rebuild()")
        conn.commit()
    rebuilt = {(k[1], k[2], k[3], k[4]): n for k, n in minute_counts(expired).items()}
    # The retried job is pending again (no record of its expiry is kept); the other four.
    assert rebuilt == {("default", "mail", "failed", "EXPIRED"): 2,
                       ("default", "report", "failed", "EXPIRED"): 2}
    assert count_deltas(expired) == counts


def test_a_rebuild_finds_a_job_that_expired_waiting_for_its_retry(clean_db):
    """A retry's execution, then the deadline passes before the next attempt: the trigger
    counts a retried outcome and a failed one (EXPIRED); so does the rebuild."""
    from jobwarden import Registry, job
    from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
    from jobwarden.worker.engine.completer import Completion, write_batch
    from jobwarden.worker.engine.producer import claim
    from tests.figures.test_rollup_rebuild import minute_counts

    reg = Registry()
    job("flaky", lease=30.0, registry=reg)(lambda ctx, payload: None)
    with psycopg.connect(clean_db) as conn:
        job_id = enqueue(conn, "flaky", {}, expires_at=datetime(2100, 1, 1, tzinfo=UTC),
                         registry=reg)
        conn.commit()
        (j,) = claim(conn, types=["flaky"], leases=[30.0], queues=None, limit=1,
                     worker_id="w1")
        conn.commit()
        write_batch(conn, [Completion(job_id=j.id, execution_id=j.execution_id, type=j.type,
                                      attempt=j.attempt, lease=30.0, status=JobStatus.PENDING,
                                      outcome=ExecutionOutcome.RETRY, error_code="UPSTREAM",
                                      error="502", delay=3600, queue=j.queue)])
        conn.commit()
        conn.execute("UPDATE background_jobs SET expires_at = now() - interval '1 s' "
                     "WHERE id = %s", [job_id])
        conn.commit()
    with psycopg.connect(clean_db, autocommit=True) as conn:
        assert expire(conn) == 1
    live = minute_counts(clean_db)
    assert sorted((k[3], k[4], n) for k, n in live.items()) == [
        ("failed", "EXPIRED", 1), ("retried", "UPSTREAM", 1)]
    with psycopg.connect(clean_db) as conn:
        conn.execute("SELECT jobwarden_rollup_rebuild()")
        conn.commit()
    assert minute_counts(clean_db) == live
