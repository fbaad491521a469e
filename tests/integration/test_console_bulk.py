"""Select and act: the reviewed set is held by the server and bounds what the action touches."""

from __future__ import annotations

import html
import re

import psycopg
import pytest

from console.data import sample_data
from tests.console_support import login
from tests.helpers import job_row


@pytest.fixture
def failed_jobs(engine):
    with engine.begin() as conn:
        return [sample_data.insert_job(conn, "send_email", "failed", queue="email",
                                       error_code="AUTH_FAILED", error="535")
                for _ in range(5)]


def select(post_form, client, data: dict) -> str:
    """POST the selection; return the review page's URL."""
    response = post_form(client, "/bulk/select", data)
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    return response.headers["Location"]


def selection_id(review_url: str) -> str:
    return re.search(r"/bulk/([0-9a-f-]{36})", review_url).group(1)


def test_ticked_jobs_are_reviewed_then_acted_on_with_one_audited_bulk(
        operator, post_form, failed_jobs, clean_db):
    ticked = failed_jobs[:2]
    review_url = select(post_form, operator, {"action": "retry",
                                              "job_id": [str(i) for i in ticked]})
    review = operator.get(review_url).get_data(as_text=True)
    assert 'data-testid="selected-count">2<' in review and "Retry 2 job(s)" in review
    sel = selection_id(review_url)
    response = post_form(operator, f"/bulk/{sel}", {"reason": "SMTP creds rotated",
                                                     "request_id": "r1"})
    assert response.status_code == 303 and f"bulk={sel}" in response.headers["Location"]
    assert [job_row(clean_db, i)["status"] for i in failed_jobs] == \
        ["pending", "pending", "failed", "failed", "failed"]
    audit = operator.get(response.headers["Location"]).get_data(as_text=True)
    assert 'data-testid="bulk-count">2<' in audit and 'data-testid="bulk-actor">otto<' in audit
    assert "SMTP creds rotated" in audit


def test_all_matching_is_the_snapshot_the_review_showed(
        operator, post_form, failed_jobs, engine, clean_db):
    review_url = select(post_form, operator, {"action": "skip", "all_matching": "1",
                                              "status": "failed", "error_code": "AUTH_FAILED"})
    assert 'data-testid="selected-count">5<' in operator.get(review_url).get_data(as_text=True)
    with engine.begin() as conn:  # fails after the review: not part of the selection
        late = sample_data.insert_job(conn, "send_email", "failed", queue="email",
                                      error_code="AUTH_FAILED", error="535")
    sel = selection_id(review_url)
    # A forged or stale form cannot widen the set: only the stored ids count.
    post_form(operator, f"/bulk/{sel}", {"reason": "drop them", "request_id": "r2",
                                         "job_id": str(late), "error_code": "AUTH_FAILED"})
    assert {job_row(clean_db, i)["status"] for i in failed_jobs} == {"skipped"}
    assert job_row(clean_db, late)["status"] == "failed"


def test_a_selection_acts_once_and_only_for_its_owner(
        app, operator, post_form, failed_jobs, users, clean_db):
    sel = selection_id(select(post_form, operator, {"action": "retry",
                                                    "job_id": str(failed_jobs[0])}))
    other = signed_in(app, "ada")
    assert other.get(f"/bulk/{sel}").status_code == 404
    post_form(other, f"/bulk/{sel}", {"reason": "mine now", "request_id": "x"})
    assert job_row(clean_db, failed_jobs[0])["status"] == "failed"
    post_form(operator, f"/bulk/{sel}", {"reason": "once", "request_id": "r3"})
    post_form(operator, f"/bulk/{sel}", {"reason": "twice", "request_id": "r4"})
    with psycopg.connect(clean_db) as conn:
        reasons = [r[0] for r in conn.execute("SELECT reason FROM job_audit ORDER BY id")]
    assert reasons == ["once"]


def signed_in(app, username: str):
    client = app.test_client()
    assert login(client, username).status_code == 303
    return client


def test_viewers_cannot_select_and_empty_or_bad_selections_change_nothing(
        app, operator, post_form, failed_jobs, clean_db):
    viewer = signed_in(app, "vera")
    assert post_form(viewer, "/bulk/select", {"action": "retry",
                                              "job_id": str(failed_jobs[0])}).status_code == 403
    page = post_form(operator, "/bulk/select", {"action": "retry", "job_id": ["abc", "-3"]},
                     follow_redirects=True).get_data(as_text=True)
    assert "No jobs selected" in page
    page = post_form(operator, "/bulk/select", {"action": "delete", "job_id": "1"},
                     follow_redirects=True).get_data(as_text=True)
    assert "Choose retry, cancel, skip" in page
    assert operator.get("/bulk/not-a-uuid").status_code == 404
    assert {job_row(clean_db, i)["status"] for i in failed_jobs} == {"failed"}


def test_the_jobs_list_and_failed_group_offer_selection_to_operators_only(
        app, operator, failed_jobs):
    viewer = signed_in(app, "vera")
    for path in ("/jobs?status=failed", "/failed/group?code=AUTH_FAILED"):
        html = operator.get(path).get_data(as_text=True)
        assert 'data-testid="select-bar"' in html
        assert html.count('name="job_id"') == 5
    assert 'data-testid="select-bar"' not in viewer.get("/jobs").get_data(as_text=True)


def test_a_request_id_reused_from_a_single_job_action_does_not_burn_a_selection(
        operator, post_form, engine, clean_db):
    with engine.begin() as conn:
        one, other = (sample_data.insert_job(conn, "send_email", "pending") for _ in range(2))
    post_form(operator, f"/jobs/{one}/cancel", {"reason": "dup", "request_id": "same-id"})
    assert job_row(clean_db, one)["status"] == "cancelled"
    sel = selection_id(select(post_form, operator, {"action": "cancel", "job_id": str(other)}))
    page = post_form(operator, f"/bulk/{sel}", {"reason": "bulk", "request_id": "same-id"},
                     follow_redirects=True).get_data(as_text=True)
    assert "Already done" not in page
    assert job_row(clean_db, other)["status"] == "cancelled"
    # and the selection's own resubmission is still recognised as done
    page = post_form(operator, f"/bulk/{sel}", {"reason": "bulk", "request_id": "same-id"},
                     follow_redirects=True).get_data(as_text=True)
    assert "Already done" in page


def test_all_matching_with_an_unknown_status_is_refused_and_selects_nothing(
        operator, post_form, failed_jobs, clean_db):
    response = post_form(operator, "/bulk/select", {"action": "skip", "all_matching": "1",
                                                    "status": "faild"})
    assert response.status_code == 400
    assert "Unknown status 'faild'" in html.unescape(response.get_data(as_text=True))
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*) FROM console_selections").fetchone()[0] == 0
    assert {job_row(clean_db, i)["status"] for i in failed_jobs} == {"failed"}
