"""A request id recognises a resubmitted form only for the same action, target and actor:
an id reused from the audit log never suppresses an unrelated action."""

from __future__ import annotations

from jobwarden.console.data.sample_data import insert_job
from jobwarden.worker.ops import operations
from jobwarden.worker.store.queries import Q
from tests.helpers import job_row


def jobs(engine, *statuses):
    with engine.begin() as conn:
        return [insert_job(conn, status=s) for s in statuses]


def act(conn, fn, target, actor="otto", request_id="r-1", **kw):
    result = fn(conn, target, actor=actor, role="operator", reason="why",
                request_id=request_id, **kw)
    conn.commit()
    return result


def test_the_same_form_submitted_twice_acts_once(conn, engine):
    (a,) = jobs(engine, "failed")
    assert act(conn, operations.retry_job, a).ok
    second = act(conn, operations.retry_job, a)
    assert second.duplicate and "Already done" in second.message


def test_a_reused_request_id_does_not_suppress_another_job(conn, engine, clean_db):
    a, b = jobs(engine, "failed", "failed")
    assert act(conn, operations.retry_job, a).ok
    other = act(conn, operations.retry_job, b)
    assert other.ok and not other.duplicate
    assert job_row(clean_db, b)["status"] == "pending"


def test_a_reused_request_id_does_not_suppress_another_action(conn, engine, clean_db):
    a, b = jobs(engine, "failed", "pending")
    assert act(conn, operations.retry_job, a).ok
    cancelled = act(conn, operations.cancel_job, b)
    assert cancelled.ok and not cancelled.duplicate
    # The same job too: retried, then cancelled with the same id.
    cancelled_too = act(conn, operations.cancel_job, a)
    assert cancelled_too.ok and not cancelled_too.duplicate
    assert job_row(clean_db, a)["status"] == job_row(clean_db, b)["status"] == "cancelled"


def test_a_reused_request_id_does_not_suppress_another_actor(conn, engine, clean_db):
    jobs(engine, "pending")  # on the default queue, which it makes a known one
    assert act(conn, operations.pause_queue, "default").ok
    assert act(conn, operations.resume_queue, "default", request_id="r-2").ok
    by_ada = act(conn, operations.pause_queue, "default", actor="ada")
    assert by_ada.ok and not by_ada.duplicate


def test_a_reused_request_id_does_not_suppress_another_group(conn, engine, clean_db):
    from datetime import UTC, datetime, timedelta

    with engine.begin() as c:
        a = insert_job(c, status="failed", error_code="A_CODE")
        b = insert_job(c, status="failed", error_code="B_CODE")
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert act(conn, operations.retry_group, "A_CODE", seen_until=later).ok
    other = act(conn, operations.retry_group, "B_CODE", seen_until=later)
    assert other.ok and not other.duplicate
    assert job_row(clean_db, a)["status"] == job_row(clean_db, b)["status"] == "pending"


def test_the_look_up_of_an_earlier_submission_can_use_the_request_id_index(conn):
    # Audit rows are kept for good: a scan of them on every click grows without bound.
    # One operator's history of 5,000 clicks, each with its own request id, analyzed so
    # that the plan follows these rows and not statistics an earlier test left (the
    # embedded server runs autovacuum; TRUNCATE keeps pg_statistic): the actor's index
    # then reads all 5,000, the request id's one.
    conn.execute("INSERT INTO job_audit (actor, role, action, reason, request_id) "
                 "SELECT 'otto', 'operator', 'retry', 'r', 'old-' || i "
                 "FROM generate_series(1, 5000) i")
    conn.execute("ANALYZE job_audit")
    conn.execute("SET enable_seqscan = off")  # the plan the index allows, at any size
    plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + Q.operator_audit_by_request, {
        "request_id": "r-1", "action": "retry", "actor": "otto", "job_id": 1,
        "error_code": None, "job_type": None, "queue": None, "bulk_id": None,
        "schedule": None, "limit_target": None}))
    assert "job_audit_request_idx" in plan, plan
