"""Job detail tells the current story; pending jobs can be run now or rescheduled, audited."""

from __future__ import annotations

import re

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
    post_form(operator, f"/jobs/{job_id}/schedule",
              {"when": "at", "run_at": "2099-01-02T03:04", "reason": "after the freeze",
               "request_id": "s2"})
    assert job_row(clean_db, job_id)["available_at"].year == 2099
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
