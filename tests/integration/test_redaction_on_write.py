"""Secrets are redacted when they are written, not only when they are shown: an
operator's reason, a handler's progress, error code and error message, read back raw
with SQL after going through the real console and a real worker."""

from __future__ import annotations

import psycopg

from tests.helpers import job_row, running_worker, scalar, wait_for
from tests.integration.test_console_schedules import publish_report_schedule
from worker import PermanentError, Registry, enqueue, job

PASSWORD = "hunter2!x"
REASON = f"provider fixed; their password {PASSWORD} was in the ticket"


def test_an_operators_reason_is_stored_redacted_whatever_the_action(operator, post_form,
                                                                    make_job, clean_db):
    failed = make_job("failed")
    publish_report_schedule(clean_db)
    for path, token_from in ((f"/jobs/{failed}/retry", f"/jobs/{failed}"),
                             ("/queues/default/pause", "/queues"),
                             ("/schedules/nightly_report/pause", "/schedules")):
        response = post_form(operator, path, {"reason": REASON, "request_id": f"r-{path}"},
                             token_from=token_from)
        assert response.status_code == 303, path
    with psycopg.connect(clean_db) as conn:
        reasons = dict(conn.execute("SELECT action, reason FROM job_audit"))
    assert {"retry", "pause_queue", "pause_schedule"} <= set(reasons), reasons
    for action, reason in reasons.items():
        assert PASSWORD not in reason and "[REDACTED]" in reason, (action, reason)
        assert reason.startswith("provider fixed; their password")


def test_a_handlers_progress_code_and_error_are_stored_redacted(conn, clean_db):
    reg = Registry()

    @job("charge", registry=reg, max_attempts=1)
    def charge(ctx, payload):
        ctx.progress(processed=1, total=2, note="calling https://bob:s3cretpw@api.example.com",
                     api_key="k-9f8e7d6c")
        ctx.heartbeat()  # written now, through save_progress
        raise PermanentError("DECLINED_sk_live_4eC39HqLyjWDarjtT1zdp7dc",
                             "card_number=4242424242424242 declined")

    job_id = enqueue(conn, "charge", {"order": 7})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, job_id)["status"] == "failed", message="the failure")
    row = job_row(clean_db, job_id)
    assert (row["progress"]["processed"], row["progress"]["total"]) == (1, 2)
    assert row["progress"]["api_key"] == "[REDACTED]"
    assert row["progress"]["note"] == "calling https://bob:[REDACTED]@api.example.com"
    assert row["last_error_code"] == "DECLINED_[REDACTED]"
    assert row["last_error"] == "card_number=[REDACTED] declined"
    stored = scalar(clean_db, "SELECT string_agg(e::text, ' ') FROM job_executions e "
                              "WHERE job_id = %s", [job_id])
    for secret in ("s3cretpw", "k-9f8e7d6c", "4eC39HqLyjWDarjtT1zdp7dc", "4242424242424242"):
        assert secret not in stored and secret not in str(row), secret
