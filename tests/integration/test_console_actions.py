"""Operator actions through the console: guarded, audited, acting once, refusing viewers."""

from __future__ import annotations

import re

import psycopg
import pytest

from tests.helpers import job_row


def audit_rows(url: str, job_id: int | None = None) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT action, actor, role, reason, from_status, to_status, bulk_id FROM job_audit "
            "WHERE %(job)s::bigint IS NULL OR job_id = %(job)s ORDER BY id",
            {"job": job_id},
        ).fetchall()


def page_after(post_form, client, url: str, data: dict) -> str:
    """The page the browser lands on after posting the form (with its flash message)."""
    return post_form(client, url, data, follow_redirects=True).get_data(as_text=True)


def test_retrying_a_failed_job_puts_it_back_to_pending_with_an_audit_row(
    operator, post_form, make_job, clean_db
):
    job_id = make_job("failed", max_attempts=3, attempts=3)
    response = post_form(
        operator,
        f"/jobs/{job_id}/retry",
        {"reason": "provider fixed", "request_id": "a1", "expected_status": "failed"},
    )
    assert response.status_code == 303
    job = job_row(clean_db, job_id)
    assert job["status"] == "pending" and job["manual_retry_count"] == 1
    assert job["retried_by"] == "otto" and job["retried_at"] is not None
    assert job["max_attempts"] == 4 and job["attempts"] == 3 and job["execution_id"] is None
    assert audit_rows(clean_db, job_id) == [
        ("retry", "otto", "operator", "provider fixed", "failed", "pending", None)
    ]
    page = operator.get(response.headers["Location"]).get_data(as_text=True)
    assert "back in pending" in page


def test_a_double_submitted_retry_acts_once(operator, post_form, make_job, clean_db):
    job_id = make_job("failed")
    form = {"reason": "once", "request_id": "same-form", "expected_status": "failed"}
    post_form(operator, f"/jobs/{job_id}/retry", form)
    second = post_form(operator, f"/jobs/{job_id}/retry", form, follow_redirects=True)
    assert "Already done" in second.get_data(as_text=True)
    assert job_row(clean_db, job_id)["manual_retry_count"] == 1
    assert len(audit_rows(clean_db, job_id)) == 1


def test_a_completed_job_is_never_resurrected(operator, post_form, make_job, clean_db):
    job_id = make_job("completed")
    for action in ("retry", "cancel", "skip"):
        page = post_form(
            operator,
            f"/jobs/{job_id}/{action}",
            {"reason": "try", "request_id": f"c-{action}"},
            follow_redirects=True,
        )
        assert "Nothing was changed" in page.get_data(as_text=True)
    assert job_row(clean_db, job_id)["status"] == "completed"
    assert audit_rows(clean_db, job_id) == []


def test_an_action_racing_a_worker_loses_with_a_clear_message(
    operator, post_form, make_job, clean_db
):
    job_id = make_job("pending")
    form = operator.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert f'action="/jobs/{job_id}/skip"' in form
    # a worker claims the job while the operator is typing the reason
    with psycopg.connect(clean_db) as conn:
        conn.execute(
            "UPDATE background_jobs SET status = 'running', execution_id = gen_random_uuid(),"
            " worker_id = 'w1' WHERE id = %s",
            (job_id,),
        )
    page = page_after(
        post_form,
        operator,
        f"/jobs/{job_id}/skip",
        {"reason": "not needed", "request_id": "r", "expected_status": "pending"},
    )
    assert "is now running (it was pending when you looked)" in page
    assert job_row(clean_db, job_id)["status"] == "running"
    assert audit_rows(clean_db, job_id) == []


def seen_retried_at(page: str) -> str:
    """The last retry the job page's action forms say the operator saw."""
    found = re.findall(r'name="seen_retried_at" type="hidden" value="([^"]*)"|'
                       r'type="hidden" name="seen_retried_at" value="([^"]*)"|'
                       r'name="seen_retried_at" value="([^"]*)"', page)
    values = {v for match in found for v in match if v}  # a form for no one job: ""
    assert len(values) == 1, found
    return values.pop()


@pytest.mark.parametrize("action", ["retry", "skip"])
def test_a_stale_form_loses_to_a_job_retried_and_failed_again_meanwhile(
    operator, post_form, make_job, clean_db, action
):
    """Seen failed, retried by another operator and failed again (another failure): the
    stale form's action is refused, though the status is the one it saw."""
    from jobwarden.worker.ops.operations import retry_job

    job_id = make_job("failed")
    seen = seen_retried_at(operator.get(f"/jobs/{job_id}").get_data(as_text=True))
    assert seen == "never"
    with psycopg.connect(clean_db) as conn:
        assert retry_job(conn, job_id, actor="olga", role="operator", reason="fixed").ok
        conn.execute("UPDATE background_jobs SET status = 'failed', failed_at = now(), "
                     "last_error_code = 'FRAUD_SUSPECTED' WHERE id = %s", (job_id,))
    page = page_after(post_form, operator, f"/jobs/{job_id}/{action}", {
        "reason": "declined card, retry", "request_id": "stale",
        "expected_status": "failed", "seen_retried_at": seen})
    assert f"Job #{job_id} was retried by olga at " in page
    assert "after you looked, and is failed again: nothing was changed" in page
    assert job_row(clean_db, job_id)["manual_retry_count"] == 1
    assert [r[0] for r in audit_rows(clean_db, job_id)] == ["retry"]
    # Looked at again, the form carries that retry, and acts.
    seen = seen_retried_at(operator.get(f"/jobs/{job_id}").get_data(as_text=True))
    assert seen != "never"
    page = page_after(post_form, operator, f"/jobs/{job_id}/{action}", {
        "reason": "fraud checked", "request_id": "fresh",
        "expected_status": "failed", "seen_retried_at": seen})
    assert "nothing was changed" not in page.lower()
    assert [r[0] for r in audit_rows(clean_db, job_id)] == ["retry", action]


def test_a_stale_needs_review_form_loses_to_a_job_retried_and_unknown_again(
    operator, post_form, make_job, clean_db
):
    """The Needs review page's forms carry the last retry seen too."""
    from jobwarden.worker.ops.operations import retry_job

    job_id = make_job("unknown")
    seen = seen_retried_at(operator.get("/review").get_data(as_text=True))
    assert seen == "never"
    with psycopg.connect(clean_db) as conn:
        assert retry_job(conn, job_id, actor="olga", role="operator", reason="asked").ok
        conn.execute("UPDATE background_jobs SET status = 'unknown' WHERE id = %s", (job_id,))
    page = page_after(post_form, operator, f"/jobs/{job_id}/mark_completed", {
        "reason": "the provider shows it", "request_id": "stale",
        "expected_status": "unknown", "seen_retried_at": seen})
    assert "after you looked, and is unknown again: nothing was changed" in page
    assert job_row(clean_db, job_id)["status"] == "unknown"
    seen = seen_retried_at(operator.get("/review").get_data(as_text=True))
    assert seen not in ("never", "")
    page = page_after(post_form, operator, f"/jobs/{job_id}/mark_completed", {
        "reason": "the provider shows it", "request_id": "fresh",
        "expected_status": "unknown", "seen_retried_at": seen})
    assert job_row(clean_db, job_id)["status"] == "completed"


def test_a_form_whose_last_retry_is_not_a_time_changes_nothing(
    operator, post_form, make_job, clean_db
):
    job_id = make_job("failed")
    page = page_after(post_form, operator, f"/jobs/{job_id}/retry", {
        "reason": "r", "request_id": "bad", "expected_status": "failed",
        "seen_retried_at": "yesterday"})
    assert "is not a time. Nothing was changed" in page
    assert audit_rows(clean_db, job_id) == []


def test_cancelling_a_pending_job_and_requesting_cancel_of_a_running_one(
    operator, post_form, make_job, clean_db
):
    pending, running = make_job("pending"), make_job("running")
    post_form(operator, f"/jobs/{pending}/cancel", {"reason": "dup", "request_id": "x1"})
    post_form(operator, f"/jobs/{running}/cancel", {"reason": "too slow", "request_id": "x2"})
    assert job_row(clean_db, pending)["status"] == "cancelled"
    job = job_row(clean_db, running)
    assert job["status"] == "running" and job["cancel_requested_at"] is not None
    assert audit_rows(clean_db, running)[0][0] == "request_cancel"
    page = page_after(
        post_form, operator, f"/jobs/{running}/cancel", {"reason": "again", "request_id": "x3"}
    )
    assert "already requested" in page


def test_cancelling_a_pending_job_writes_exactly_one_audit_row_saying_who_and_why(
    operator, post_form, make_job, clean_db
):
    job_id = make_job("pending")
    response = post_form(
        operator,
        f"/jobs/{job_id}/cancel",
        {"reason": "duplicate order", "request_id": "pc1", "expected_status": "pending"},
    )
    assert response.status_code == 303
    assert job_row(clean_db, job_id)["status"] == "cancelled"
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute(
            "SELECT job_id, action, actor, role, reason, from_status, to_status, request_id "
            "FROM job_audit"
        ).fetchall()
    assert rows == [
        (job_id, "cancel", "otto", "operator", "duplicate order", "pending", "cancelled", "pc1")
    ]


def test_skipping_and_reconciling_an_unknown_job(operator, post_form, make_job, clean_db):
    unknown, other = make_job("unknown"), make_job("unknown")
    post_form(
        operator,
        f"/jobs/{unknown}/mark_completed",
        {"reason": "provider shows charge", "request_id": "m1"},
    )
    post_form(operator, f"/jobs/{other}/skip", {"reason": "order cancelled", "request_id": "m2"})
    assert job_row(clean_db, unknown)["status"] == "completed"
    assert job_row(clean_db, other)["status"] == "skipped"


def test_an_action_without_a_reason_changes_nothing(operator, post_form, make_job, clean_db):
    job_id = make_job("failed")
    page = page_after(
        post_form, operator, f"/jobs/{job_id}/retry", {"reason": "  ", "request_id": "n"}
    )
    assert "A reason is required" in page
    assert job_row(clean_db, job_id)["status"] == "failed"


def test_a_retry_is_refused_while_a_live_job_holds_the_idempotency_key(
    operator, post_form, make_job, clean_db
):
    failed = make_job("failed", idempotency_key="welcome:52")
    live = make_job("pending", idempotency_key="welcome:52")
    page = page_after(
        post_form, operator, f"/jobs/{failed}/retry", {"reason": "again", "request_id": "k"}
    )
    assert f"job #{live} is live with the same idempotency key" in page
    assert job_row(clean_db, failed)["status"] == "failed"


def review_group(post_form, operator, action: str, code: str, job_type: str | None = None):
    """Press the group page's bulk button: the server stores the group's jobs for review."""
    data = {"action": action, "all_matching": "1", "status": "failed", "error_code": code}
    if job_type:
        data["type"] = job_type
    response = post_form(operator, "/bulk/select", data)
    assert response.status_code == 303
    return response.headers["Location"].split("?")[0]


def test_bulk_retry_of_a_group_touches_only_what_was_previewed(
    operator, post_form, make_job, clean_db
):
    ids = [make_job("failed", error_code="NETWORK_TIMEOUT") for _ in range(4)]
    other = make_job("failed", error_code="AUTH_FAILED")
    page = operator.get("/failed/group?code=NETWORK_TIMEOUT").get_data(as_text=True)
    assert 'data-testid="preview-count">4<' in page and "Retry 4 job(s)" in page
    review = review_group(post_form, operator, "retry", "NETWORK_TIMEOUT")
    assert 'data-testid="selected-count">4<' in operator.get(review).get_data(as_text=True)
    late = make_job("failed", error_code="NETWORK_TIMEOUT")  # fails after the review
    response = post_form(operator, review, {"reason": "network back", "request_id": "bulk-1"},
                         follow_redirects=True)
    assert "Retried 4 of 4 selected job(s)" in response.get_data(as_text=True)
    assert [job_row(clean_db, i)["status"] for i in ids] == ["pending"] * 4
    assert job_row(clean_db, late)["status"] == "failed"
    assert job_row(clean_db, other)["status"] == "failed"
    rows = audit_rows(clean_db)
    assert len(rows) == 4 and len({r[6] for r in rows}) == 1 and rows[0][6] is not None


def test_bulk_skip_of_a_group_by_type(operator, post_form, make_job, clean_db):
    emails = [make_job("failed", type="send_email", error_code="PAYLOAD_INVALID") for _ in range(3)]
    report = make_job("failed", type="export_report", error_code="PAYLOAD_INVALID")
    page = operator.get("/failed/group?code=PAYLOAD_INVALID&type=send_email").get_data(as_text=True)
    assert 'name="type" value="send_email"' in page
    review = review_group(post_form, operator, "skip", "PAYLOAD_INVALID", "send_email")
    post_form(operator, review, {"reason": "bad template, resent by hand",
                                 "request_id": "bulk-2"})
    assert {job_row(clean_db, i)["status"] for i in emails} == {"skipped"}
    assert job_row(clean_db, report)["status"] == "failed"


def test_a_viewer_sees_no_action_buttons_and_a_forged_post_gets_403(
    viewer, post_form, make_job, clean_db
):
    job_id = make_job("failed", error_code="AUTH_FAILED")
    html = viewer.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert "action-form" not in html and 'data-testid="actions"' not in html
    group = viewer.get("/failed/group?code=AUTH_FAILED").get_data(as_text=True)
    assert "action-form" not in group and 'data-action="bulk-' not in group
    assert (
        post_form(
            viewer, f"/jobs/{job_id}/retry", {"reason": "forged", "request_id": "f"}
        ).status_code
        == 403
    )
    assert (
        post_form(
            viewer,
            "/bulk/select",
            {"action": "skip", "all_matching": "1", "status": "failed"},
        ).status_code
        == 403
    )
    assert job_row(clean_db, job_id)["status"] == "failed" and audit_rows(clean_db) == []


def stored_job(url: str, job_id: int) -> dict:
    """The job's row as stored (without the columns computed from the reading's clock)."""
    row = job_row(url, job_id)
    del row["in_future"], row["available_in"]
    return row


@pytest.mark.parametrize("headers", [
    pytest.param({}, id="a form post with no token"),
    pytest.param({"HX-Request": "true", "X-CSRFToken": "forged"}, id="an htmx post, forged token"),
])
def test_a_post_without_a_valid_csrf_token_is_refused_and_changes_nothing(
    operator, make_job, clean_db, headers
):
    job_id = make_job("failed", error_code="AUTH_FAILED")
    before = stored_job(clean_db, job_id), audit_rows(clean_db)
    # A complete, valid retry form: only the token is missing.
    response = operator.post(
        f"/jobs/{job_id}/retry",
        data={"reason": "provider fixed", "request_id": "no-token-1", "expected_status": "failed"},
        headers=headers,
    )
    assert response.status_code == 400
    assert "nothing was changed" in response.get_data(as_text=True)
    assert (stored_job(clean_db, job_id), audit_rows(clean_db)) == before


def test_an_operator_pauses_and_resumes_a_queue_from_the_queues_page(operator, post_form,
                                                                     clean_db):
    with psycopg.connect(clean_db) as conn:
        conn.execute("INSERT INTO background_jobs (type, queue, payload) VALUES ('t', 'email', '{}')")
    page = operator.get("/queues").get_data(as_text=True)
    assert 'data-queue="email"' in page and 'data-action="pause"' in page
    response = post_form(operator, "/queues/email/pause",
                         {"reason": "SMTP outage", "request_id": "q-1"}, token_from="/queues")
    assert response.status_code == 303
    page = operator.get("/queues").get_data(as_text=True)
    assert "is paused" in page and 'data-action="resume"' in page
    assert 'data-testid="paused-queues"' in operator.get("/").get_data(as_text=True)
    # the same form submitted again acts once
    post_form(operator, "/queues/email/pause", {"reason": "SMTP outage", "request_id": "q-1"},
              token_from="/queues")
    post_form(operator, "/queues/email/resume", {"reason": "fixed", "request_id": "q-2"},
              token_from="/queues")
    audit_page = operator.get("/audit?action=pause_queue").get_data(as_text=True)
    assert "SMTP outage" in audit_page and 'href="/jobs?queue=email"' in audit_page
    assert 'data-testid="paused-queues"' not in operator.get("/").get_data(as_text=True)
    assert audit_rows(clean_db) == [
        ("pause_queue", "otto", "operator", "SMTP outage", "active", "paused", None),
        ("resume_queue", "otto", "operator", "fixed", "paused", "active", None)]


def test_a_viewer_cannot_pause_a_queue(viewer, post_form, clean_db):
    with psycopg.connect(clean_db) as conn:
        conn.execute("INSERT INTO background_jobs (type, queue, payload) VALUES ('t', 'email', '{}')")
    assert 'data-action="pause"' not in viewer.get("/queues").get_data(as_text=True)
    response = post_form(viewer, "/queues/email/pause", {"reason": "x", "request_id": "v-1"},
                         token_from="/queues")
    assert response.status_code == 403
    assert audit_rows(clean_db) == []
