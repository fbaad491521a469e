"""Expiry (docs/guide/uniqueness.md#expiry): a job not started by its deadline is never
started, and ends failed with the code EXPIRED; a running job is left to its timeout."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from jobwarden import Dep, EnqueueError, JobSpec, Registry, enqueue, enqueue_many, job
from jobwarden.worker.duties.expiry import expire
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.ops.operations import retry_job
from tests.helpers import job_row, running_worker, scalar, wait_for


def _db_now(conn: psycopg.Connection) -> datetime:
    return conn.execute("SELECT clock_timestamp()").fetchone()[0]


def _claim(url: str, types: list[str] | None = None) -> list:
    types = types or ["t"]
    with psycopg.connect(url) as c:
        return claim(c, types=types, leases=[60.0] * len(types), queues=None, limit=10,
                     worker_id="w1")


def _expire(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as c:
        return expire(c)


def test_the_claim_never_starts_an_expired_job_before_the_duty_runs(clean_db, conn):
    past = _db_now(conn) - timedelta(seconds=1)
    expired = enqueue(conn, "t", {"n": 1}, expires_at=past)
    later = enqueue(conn, "t", {"n": 2}, expires_at=past + timedelta(hours=1))
    plain = enqueue(conn, "t", {"n": 3})
    conn.commit()
    assert sorted(j.id for j in _claim(clean_db)) == [later, plain]
    assert job_row(clean_db, expired)["status"] == "pending"  # until the duty ends it


def test_the_duty_ends_expired_jobs_failed_with_the_code_expired(clean_db, conn):
    past = _db_now(conn) - timedelta(seconds=1)
    ids = enqueue_many(conn, [JobSpec("t", {"n": n}, expires_at=past) for n in range(3)]
                       + [JobSpec("u", {}, expires_at=past), JobSpec("t", {})])
    conn.commit()
    assert _expire(clean_db) == 4
    rows = [job_row(clean_db, i) for i in ids]
    assert [(r["status"], r["last_error_code"], r["attempts"]) for r in rows[:4]] == [
        ("failed", "EXPIRED", 0)] * 4
    assert all(r["failed_at"] is not None and "deadline" in r["last_error"] for r in rows[:4])
    assert rows[4]["status"] == "pending"
    assert scalar(clean_db, "SELECT count(*) FROM job_executions") == 0  # none started
    totals = dict(conn.execute("SELECT type, total FROM job_event_totals "
                               "WHERE event = 'expired'").fetchall())
    assert totals == {"t": 3, "u": 1}
    assert _expire(clean_db) == 0  # a second pass finds nothing


def test_the_duty_works_in_batches(clean_db, conn):
    past = _db_now(conn) - timedelta(seconds=1)
    enqueue_many(conn, [JobSpec("t", {"n": n}, expires_at=past) for n in range(25)])
    conn.commit()
    with psycopg.connect(clean_db, autocommit=True) as c:
        assert expire(c, batch=10, max_batches=2) == 20
        assert expire(c, batch=10, max_batches=2) == 5


def test_a_running_job_at_its_deadline_is_not_touched(clean_db, conn):
    soon = _db_now(conn) + timedelta(seconds=30)
    job_id = enqueue(conn, "t", {}, expires_at=soon)
    conn.commit()
    (claimed,) = _claim(clean_db)
    conn.execute("UPDATE background_jobs SET expires_at = now() - interval '1 s' "
                 "WHERE id = %s", [job_id])
    conn.commit()
    assert _expire(clean_db) == 0
    assert job_row(clean_db, job_id)["status"] == "running"


def test_a_types_expires_after_counts_from_the_run_time(clean_db, conn):
    reg = Registry()
    job("report", expires_after="1h", registry=reg)(lambda ctx, p: None)
    at = _db_now(conn) + timedelta(days=1)
    job_id = enqueue(conn, "report", {}, run_at=at, registry=reg)
    given = enqueue(conn, "report", {}, expires_at=at + timedelta(minutes=5), registry=reg)
    conn.commit()
    assert job_row(clean_db, job_id)["expires_at"] == at + timedelta(hours=1)
    assert job_row(clean_db, given)["expires_at"] == at + timedelta(minutes=5)


def test_a_deadline_already_past_at_enqueue_is_taken_and_ends_expired(clean_db, conn):
    """Whether it is past is the database's clock's call, not the caller's: the job is
    written, never started, and ends EXPIRED like any other."""
    job_id = enqueue(conn, "t", {}, expires_at=datetime(2000, 1, 1, tzinfo=UTC))
    conn.commit()
    assert _claim(clean_db) == []
    _expire(clean_db)
    assert job_row(clean_db, job_id)["last_error_code"] == "EXPIRED"


def test_an_operators_retry_runs_an_expired_job_after_all(clean_db, conn):
    job_id = enqueue(conn, "t", {}, expires_at=datetime(2000, 1, 1, tzinfo=UTC))
    conn.commit()
    _expire(clean_db)
    result = retry_job(conn, job_id, actor="ann", role="operator", reason="run it anyway")
    conn.commit()
    assert result.ok
    assert job_row(clean_db, job_id)["expires_at"] is None
    assert [j.id for j in _claim(clean_db)] == [job_id]


def test_an_expired_parent_releases_only_its_run_anyway_dependents(clean_db, conn):
    parent = enqueue(conn, "t", {}, expires_at=datetime(2000, 1, 1, tzinfo=UTC))
    held = enqueue(conn, "t", {}, after=[parent])
    anyway = enqueue(conn, "t", {}, after=[Dep(parent, run_anyway=True)])
    conn.commit()
    _expire(clean_db)
    assert job_row(clean_db, held)["status"] == "waiting"
    assert job_row(clean_db, anyway)["status"] == "pending"


@pytest.mark.parametrize(("options", "message"), [
    ({"expires_at": datetime(2030, 1, 1)}, "timezone-aware"),
    ({"expires_at": "2030-01-01T00:00:00Z"}, "timezone-aware"),
    ({"expires_at": datetime(2030, 1, 1, tzinfo=UTC),
      "run_at": datetime(2030, 1, 2, tzinfo=UTC)}, "could never start"),
])
def test_bad_deadlines_are_one_line_and_write_nothing(clean_db, conn, options, message):
    with pytest.raises(EnqueueError, match=message) as raised:
        enqueue(conn, "t", {}, **options)
    assert "\n" not in str(raised.value)
    conn.commit()
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


@pytest.mark.parametrize("value", ["0s", "-1m", "100y", 10 * 366 * 86400 + 1])
def test_a_bad_expires_after_is_refused_at_declaration(value):
    with pytest.raises(ValueError, match="expires_after="):
        job("x", expires_after=value, registry=Registry())(lambda ctx, p: None)


def test_a_worker_never_starts_a_job_past_its_deadline(clean_db, conn, monkeypatch):
    """A real worker: the job's queue is paused past its deadline, then resumed; the job
    ends EXPIRED and its handler never runs. A job whose deadline passes while it runs
    completes: its timeout governs it."""
    monkeypatch.setenv("JOBWARDEN_DUTY_INTERVAL", "0.2")
    ran: list[str] = []
    release = threading.Event()
    reg = Registry()

    @job("late", queue="slow", registry=reg)
    def late(ctx, payload):
        ran.append("late")

    @job("long", registry=reg)
    def long_job(ctx, payload):
        ran.append("long")
        release.wait(20)

    conn.execute("INSERT INTO queue_controls (queue, paused) VALUES ('slow', true)")
    soon = _db_now(conn) + timedelta(seconds=1)
    late_id = enqueue(conn, "late", {}, expires_at=soon, registry=reg)
    long_id = enqueue(conn, "long", {}, expires_at=soon, registry=reg)
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, long_id)["status"] == "running")
        wait_for(lambda: scalar(clean_db, "SELECT now() > %s", [soon]))
        conn.execute("UPDATE queue_controls SET paused = false WHERE queue = 'slow'")
        conn.commit()
        wait_for(lambda: job_row(clean_db, late_id)["status"] == "failed")
        release.set()
        wait_for(lambda: job_row(clean_db, long_id)["status"] == "completed")
    assert job_row(clean_db, late_id)["last_error_code"] == "EXPIRED"
    assert ran == ["long"]
