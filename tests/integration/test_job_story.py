"""Job detail tells the current story; pending jobs can be run now or rescheduled, audited."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import psycopg

from tests.helpers import job_row


def test_a_retried_job_shows_its_state_first_and_the_old_error_as_history(
        operator, make_job, clean_db):
    job_id = make_job("pending", attempts=3, last_error_code="AUTH_FAILED",
                      last_error="SMTP 535 (attempt 3 of 3: giving up)")
    html = operator.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert 'data-testid="current-error"' not in html
    assert 'data-testid="earlier-error"' in html and "history" in html
    failed = make_job("failed", error_code="AUTH_FAILED", error="SMTP 535")
    assert 'data-testid="current-error"' in operator.get(f"/jobs/{failed}").get_data(as_text=True)


def test_lists_do_not_show_an_earlier_attempts_code_as_an_error(operator, make_job):
    done = make_job("completed", last_error_code="PROVIDER_5XX", last_error="502")
    skipped = make_job("skipped", last_error_code="SKIPPED", last_error="not needed")
    html = operator.get("/jobs").get_data(as_text=True)
    for job_id in (done, skipped):
        row = re.search(rf'<tr data-job-id="{job_id}">(.*?)</tr>', html, re.S).group(1)
        assert 'class="code"' not in row and "earlier:" in row


def test_timestamps_show_their_timezone_and_age(operator, make_job):
    job_id = make_job("completed", ago=600)
    html = operator.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert re.search(r"<time datetime=\"[^\"]+\">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>", html)
    assert re.search(r"1\dm \d\ds ago", html)


def test_a_future_job_runs_now_or_moves_with_an_audit_row(operator, post_form, make_job,
                                                          clean_db):
    job_id = make_job("pending")
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE background_jobs SET available_at = now() + interval '2 days' "
                     "WHERE id = %s", (job_id,))
    assert 'data-action="schedule"' in operator.get(f"/jobs/{job_id}").get_data(as_text=True)
    post_form(operator, f"/jobs/{job_id}/schedule",
              {"when": "now", "reason": "customer waiting", "request_id": "s1"})
    assert not job_row(clean_db, job_id)["in_future"]
    later = (datetime.now(UTC) + timedelta(days=30)).replace(second=0, microsecond=0)
    post_form(operator, f"/jobs/{job_id}/schedule",
              {"when": "at", "run_at": later.strftime("%Y-%m-%dT%H:%M"),
               "reason": "after the freeze", "request_id": "s2"})
    assert job_row(clean_db, job_id)["available_at"] == later
    page = post_form(operator, f"/jobs/{job_id}/schedule",
                     {"when": "at", "run_at": "soon", "reason": "x", "request_id": "s3"},
                     follow_redirects=True).get_data(as_text=True)
    assert "YYYY-MM-DDTHH:MM" in page
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute("SELECT action, reason FROM job_audit WHERE job_id = %s ORDER BY id",
                            (job_id,)).fetchall()
    assert rows == [("run_now", "customer waiting"), ("reschedule", "after the freeze")]
    done = make_job("completed")
    post_form(operator, f"/jobs/{done}/schedule",
              {"when": "now", "reason": "nope", "request_id": "s4"})
    assert job_row(clean_db, done)["status"] == "completed"


def reschedule(operator, post_form, job_id: int, run_at: str, request_id: str) -> str:
    return post_form(operator, f"/jobs/{job_id}/schedule",
                     {"when": "at", "run_at": run_at, "reason": "move it",
                      "request_id": request_id},
                     follow_redirects=True).get_data(as_text=True)


def test_a_reschedule_outside_the_window_is_refused_and_changes_nothing(
        operator, post_form, make_job, clean_db):
    job_id = make_job("pending")
    before = job_row(clean_db, job_id)["available_at"]
    now = datetime.now(UTC)
    for n, run_at in enumerate(["0001-01-01T00:00", (now - timedelta(days=2)).isoformat(),
                                (now + timedelta(days=400)).isoformat(), "9999-12-31T23:59"]):
        page = reschedule(operator, post_form, job_id, run_at, f"w{n}")
        assert "not before one day ago nor after one year from now" in page, run_at
    assert job_row(clean_db, job_id)["available_at"] == before
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*) FROM job_audit").fetchone()[0] == 0


def test_a_reschedule_honours_an_explicit_offset_and_reads_a_naive_time_as_utc(
        operator, post_form, make_job, clean_db):
    job_id = make_job("pending")
    day = (datetime.now(UTC) + timedelta(days=3)).date().isoformat()
    reschedule(operator, post_form, job_id, f"{day}T09:30+05:00", "o1")
    assert job_row(clean_db, job_id)["available_at"] == \
        datetime.fromisoformat(f"{day}T04:30+00:00")
    reschedule(operator, post_form, job_id, f"{day}T09:30", "o2")
    assert job_row(clean_db, job_id)["available_at"] == \
        datetime.fromisoformat(f"{day}T09:30+00:00")
