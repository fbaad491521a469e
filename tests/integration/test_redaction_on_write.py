"""Secrets are redacted when they are written, not only when they are shown: an
operator's reason, a handler's progress, error code and error message, read back raw
with SQL after going through the real console and a real worker."""

from __future__ import annotations

import re

import psycopg

from jobwarden import PermanentError, Registry, enqueue, job
from jobwarden.console.data.sample_data import insert_job
from jobwarden.worker.core.sanitize import redact
from jobwarden.worker.ops import operations
from tests.helpers import job_row, running_worker, scalar, wait_for
from tests.integration.test_console_schedules import publish_report_schedule

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


STRIPE_KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"


def _bulk_retry(client, post_form, job_id: int, reason: str, request_id: str) -> str:
    """Select one failed job for a bulk retry and start it with `reason`; its selection id."""
    response = post_form(client, "/bulk/select", {"action": "retry", "job_id": str(job_id)})
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    selection = re.search(r"/bulk/([0-9a-f-]{36})", response.headers["Location"]).group(1)
    response = post_form(client, f"/bulk/{selection}", {"reason": reason,
                                                        "request_id": request_id})
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    return selection


def test_a_bulk_reason_is_stored_redacted_then_capped(operator, post_form, make_job, clean_db):
    """The selection and its audit rows hold the reason redacted, then cut to 500 characters.
    The form takes at most 500 typed characters; redaction can make them longer (`pin=1`
    becomes `pin=[REDACTED]`): the cut must come after it, or the stored reason is longer
    than the cap."""
    under = f"card declined, pin=1 and key {STRIPE_KEY} in the ticket"
    # 10 × "pin=1 " grows by 90 when redacted: 493 typed characters, 561 redacted.
    over = "pin=1 " * 10 + "a" * 400 + " " + STRIPE_KEY
    assert len(over) <= operations.REASON_MAX < len(redact(over))
    expected = {
        _bulk_retry(operator, post_form, make_job("failed"), under, "r-under"):
            "card declined, pin=[REDACTED] and key [REDACTED] in the ticket",
        _bulk_retry(operator, post_form, make_job("failed"), over, "r-over"):
            ("pin=[REDACTED] " * 10 + "a" * 400)[:operations.REASON_MAX],
    }
    with psycopg.connect(clean_db) as conn:
        stored = dict(conn.execute("SELECT id::text, reason FROM console_selections"))
        audited = [r for (r,) in conn.execute("SELECT reason FROM job_audit")]
    assert stored == expected
    assert sorted(audited) == sorted(expected.values())


def test_an_operators_long_reason_is_redacted_before_it_is_capped(conn, engine):
    """A reason from the API or the CLI has no form limit: a Stripe key astride the
    500-character cut is redacted whole (cut first, `sk_live_` and 7 characters would stay,
    too short for the redactor to know), and a reason that redacted still passes the cap
    is cut to exactly 500."""
    with engine.begin() as c:
        astride_job, over_job = (insert_job(c, status="failed") for _ in range(2))
    astride = "a" * 484 + " " + STRIPE_KEY  # the key at 485..516: the cut falls inside it
    over = "b" * 600 + " " + STRIPE_KEY
    for job_id, reason in ((astride_job, astride), (over_job, over)):
        assert operations.retry_job(conn, job_id, actor="otto", role="operator",
                                    reason=reason).ok
        conn.commit()
    reasons = dict(conn.execute("SELECT job_id, reason FROM job_audit").fetchall())
    assert reasons == {astride_job: "a" * 484 + " [REDACTED]", over_job: "b" * 500}


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
