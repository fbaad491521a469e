"""Pausing a queue: workers claim none of its jobs until it is resumed; all audited."""

from __future__ import annotations

import psycopg
import pytest

from jobwarden import Registry, enqueue, job
from jobwarden.worker.ops.operations import pause_queue, queue_controls, resume_queue
from tests.helpers import job_row, running_worker, scalar, wait_for
from tests.integration.test_cli import jobwarden


def mail_and_pdf() -> Registry:
    """Two job types on two queues: `mail` on email, `pdf` on reports."""
    reg = Registry()
    job("mail", queue="email", registry=reg)(lambda ctx, payload: None)
    job("pdf", queue="reports", registry=reg)(lambda ctx, payload: None)
    return reg


def test_a_paused_queue_is_not_claimed_until_resumed(conn, clean_db):
    reg = mail_and_pdf()
    mail_id = enqueue(conn, "mail", {}, registry=reg)
    pdf_id = enqueue(conn, "pdf", {}, registry=reg)
    result = pause_queue(conn, "email", actor="ann", role="operator", reason="SMTP outage")
    assert result.ok and "paused" in result.message
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, pdf_id)["status"] == "completed")
        assert job_row(clean_db, mail_id)["status"] == "pending"  # other queues keep flowing
        assert resume_queue(conn, "email", actor="ann", role="operator", reason="fixed").ok
        conn.commit()
        wait_for(lambda: job_row(clean_db, mail_id)["status"] == "completed",
                 message="the resumed queue's job to run")
    rows = conn.execute("SELECT actor, action, reason, from_status, to_status, "
                        "details->>'queue' FROM job_audit ORDER BY id").fetchall()
    assert rows == [("ann", "pause_queue", "SMTP outage", "active", "paused", "email"),
                    ("ann", "resume_queue", "fixed", "paused", "active", "email")]


def test_pausing_twice_acts_once_and_resuming_an_active_queue_changes_nothing(conn, clean_db):
    conn.execute("INSERT INTO background_jobs (type, queue, payload) VALUES ('t', 'email', '{}')")
    assert not resume_queue(conn, "email", actor="a", role="admin", reason="r").ok
    assert pause_queue(conn, "email", actor="a", role="admin", reason="r").ok
    again = pause_queue(conn, "email", actor="b", role="admin", reason="r")
    assert not again.ok and "already paused" in again.message
    conn.commit()
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 1
    assert queue_controls(conn)["email"]["changed_by"] == "a"


@pytest.mark.parametrize("kwargs, error", [
    ({"role": "viewer", "reason": "r"}, PermissionError),
    ({"role": "operator", "reason": "  "}, ValueError),
])
def test_pausing_needs_an_acting_role_and_a_reason(conn, kwargs, error):
    with pytest.raises(error):
        pause_queue(conn, "email", actor="v", **kwargs)


def test_a_queue_name_is_validated(conn):
    with pytest.raises(ValueError, match="invalid queue"):
        pause_queue(conn, "<script>", actor="a", role="admin", reason="r")


def test_the_cli_pauses_lists_and_resumes(conn, clean_db):
    conn.execute("INSERT INTO background_jobs (type, queue, payload) VALUES ('t', 'email', '{}')")
    conn.commit()
    paused = jobwarden("queue", "pause", "email", "--reason", "provider down", "--actor", "ops")
    assert paused.returncode == 0, paused.stderr
    assert "paused" in jobwarden("queue", "list").stdout
    assert jobwarden("queue", "pause", "email", "--reason", "again").returncode == 1
    assert jobwarden("queue", "resume", "email", "--reason", "back").returncode == 0
    with psycopg.connect(clean_db) as c:
        assert c.execute("SELECT paused FROM queue_controls").fetchone()[0] is False
        assert c.execute("SELECT array_agg(actor ORDER BY id) FROM job_audit").fetchone()[0][0] == "ops"


def test_pausing_or_resuming_a_queue_nobody_knows_is_refused_and_lists_nothing(conn, clean_db):
    conn.execute("INSERT INTO background_jobs (type, queue, payload) VALUES ('t', 'email', '{}')")
    conn.commit()
    for verb in ("pause", "resume"):
        typo = jobwarden("queue", verb, "emial", "--reason", "provider down")
        assert typo.returncode == 1, typo.stderr
        assert "Queue 'emial' is unknown" in typo.stdout
    assert jobwarden("queue", "list").stdout == "no queue has been paused\n"
    assert scalar(clean_db, "SELECT count(*) FROM queue_controls") == 0
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 0


def test_resuming_a_known_queue_that_was_never_paused_leaves_no_row(conn, clean_db):
    conn.execute("INSERT INTO background_jobs (type, queue, payload) VALUES ('t', 'email', '{}')")
    conn.commit()
    resumed = jobwarden("queue", "resume", "email", "--reason", "just in case")
    assert resumed.returncode == 1 and "already active" in resumed.stdout
    assert scalar(clean_db, "SELECT count(*) FROM queue_controls") == 0


def test_a_queue_not_in_use_yet_is_paused_only_when_named_new(clean_db):
    ahead = jobwarden("queue", "pause", "reports", "--new", "--reason", "before the deploy")
    assert ahead.returncode == 0, ahead.stderr
    assert scalar(clean_db, "SELECT array_agg(queue) FROM queue_controls WHERE paused") == [
        "reports"]


def test_pause_all_stops_every_known_queue_and_resume_all_lifts_them(conn, clean_db):
    reg = mail_and_pdf()
    job("late", queue="fresh", registry=reg)(lambda ctx, payload: None)

    ids = [enqueue(conn, "mail", {}, registry=reg), enqueue(conn, "pdf", {}, registry=reg)]
    conn.commit()
    paused = jobwarden("queue", "pause", "--all", "--reason", "restored backup", "--actor", "ops")
    assert paused.returncode == 0, paused.stderr
    assert "2 queue(s) paused" in paused.stdout
    # A queue nobody had named yet is not paused: its job runs, proving the worker claims.
    fresh = enqueue(conn, "late", {}, registry=reg)
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, fresh)["status"] == "completed")
        assert [job_row(clean_db, i)["status"] for i in ids] == ["pending", "pending"]
        resumed = jobwarden("queue", "resume", "--all", "--reason", "reconciled", "--actor", "ops")
        assert resumed.returncode == 0, resumed.stderr
        assert "2 queue(s) resumed" in resumed.stdout
        wait_for(lambda: all(job_row(clean_db, i)["status"] == "completed" for i in ids))
    rows = conn.execute("SELECT action, details->>'queue' FROM job_audit ORDER BY id").fetchall()
    assert rows == [("pause_queue", "email"), ("pause_queue", "reports"),
                    ("resume_queue", "email"), ("resume_queue", "reports")]


def test_queue_pause_wants_a_name_or_all_but_not_both(clean_db):
    neither = jobwarden("queue", "pause", "--reason", "r")
    both = jobwarden("queue", "pause", "email", "--all", "--reason", "r")
    assert (neither.returncode, both.returncode) == (2, 2)
    assert "give a queue name or --all" in neither.stderr
    assert scalar(clean_db, "SELECT count(*) FROM queue_controls") == 0
