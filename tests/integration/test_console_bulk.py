"""Select and act: the reviewed set is held by the server and bounds what the action touches."""

from __future__ import annotations

import html
import re
from datetime import UTC, timedelta

import psycopg
import pytest

from jobwarden.console.data import sample_data
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


@pytest.fixture
def aged_failures(engine):
    """AUTH_FAILED send_email jobs that failed 10 minutes, 3 hours and 3 days ago (two
    each), and one sync_crm job of the same code that failed 5 days ago."""
    ids = {}
    with engine.begin() as conn:
        for label, ago, job_type in (("10m", 600, "send_email"), ("3h", 3 * 3600, "send_email"),
                                     ("3d", 3 * 86400, "send_email"),
                                     ("5d", 5 * 86400, "sync_crm")):
            ids[label] = [sample_data.insert_job(conn, job_type, "failed",
                                                 error_code="AUTH_FAILED")
                          for _ in range(1 if label == "5d" else 2)]
            conn.exec_driver_sql("UPDATE background_jobs SET failed_at = now() - "
                                 "make_interval(secs => %(ago)s) WHERE id = ANY(%(ids)s)",
                                 {"ago": ago, "ids": ids[label]})
    return ids


def test_the_review_is_narrowed_by_type_and_failed_between(
        operator, post_form, aged_failures, clean_db):
    review_url = select(post_form, operator, {"action": "retry", "all_matching": "1",
                                              "status": "failed", "error_code": "AUTH_FAILED"})
    sel = selection_id(review_url)
    review = operator.get(review_url).get_data(as_text=True)
    assert 'data-testid="selected-count">7<' in review
    for bucket, jobs in (("hour", 2), ("day", 2), ("week", 3)):
        assert re.search(rf'data-age-row="{bucket}">.*?data-testid="age-jobs">{jobs}<',
                         review, re.S), bucket
    with psycopg.connect(clean_db) as conn:
        now = conn.execute("SELECT now()").fetchone()[0]
    # failed between 4 days and 1 hour ago: the 3-hour and 3-day-old ones
    response = post_form(operator, f"/bulk/{sel}/narrow", {
        "failed_from": f"{(now - timedelta(days=4)).astimezone(UTC):%Y-%m-%dT%H:%M:%S}",
        "failed_to": (now - timedelta(hours=1)).isoformat()})
    assert response.status_code == 303
    narrowed = operator.get(response.headers["Location"]).get_data(as_text=True)
    assert 'data-testid="selected-count">4<' in narrowed and "failed from" in narrowed
    # narrowing that one to a type keeps what is left of it
    by_type = post_form(operator, f"/bulk/{selection_id(response.headers['Location'])}/narrow",
                        {"type": "send_email"})
    page = operator.get(by_type.headers["Location"]).get_data(as_text=True)
    assert 'data-testid="selected-count">4<' in page
    post_form(operator, f"/bulk/{selection_id(by_type.headers['Location'])}",
              {"reason": "just these", "request_id": "n1", "mode": "all"})
    assert {job_row(clean_db, i)["status"] for i in aged_failures["3h"] + aged_failures["3d"]} \
        == {"pending"}
    assert {job_row(clean_db, i)["status"] for i in aged_failures["10m"] + aged_failures["5d"]} \
        == {"failed"}


@pytest.mark.parametrize("fields, problem", [
    ({"failed_from": "yesterday"}, "Give the failure times as YYYY-MM-DDTHH:MM"),
    ({"failed_from": "2026-12-02T10:00", "failed_to": "2026-12-01T10:00"},
     "The range's start must come before its end"),
    ({"failed_to": "9999-99-99"}, "Give the failure times"),
    ({"type": "  "}, "Give a type or a time range"),
    ({}, "Give a type or a time range"),
])
def test_a_bad_narrowing_is_refused_and_selects_nothing(
        operator, post_form, aged_failures, clean_db, fields, problem):
    sel = selection_id(select(post_form, operator, {"action": "skip", "all_matching": "1",
                                                    "status": "failed"}))
    page = post_form(operator, f"/bulk/{sel}/narrow", fields,
                     follow_redirects=True).get_data(as_text=True)
    assert problem in html.unescape(page)
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*) FROM console_selections").fetchone()[0] == 1
    # the same checks guard the selection made from a list
    if "type" not in fields and fields:
        page = post_form(operator, "/bulk/select", {"action": "skip", "all_matching": "1",
                                                    "status": "failed", **fields},
                         follow_redirects=True).get_data(as_text=True)
        assert problem in html.unescape(page)
    assert {job_row(clean_db, i)["status"] for ids in aged_failures.values() for i in ids} \
        == {"failed"}


@pytest.mark.parametrize("field, value", [
    ("failed_to", "9999-12-31T23:59:59-14:00"),  # after datetime's last moment in UTC
    ("failed_from", "0001-01-01T00:00:00+14:00"),  # before its first
])
def test_a_failure_time_out_of_range_is_a_400_that_selects_nothing(
        operator, post_form, aged_failures, clean_db, field, value):
    sel = selection_id(select(post_form, operator, {"action": "skip", "all_matching": "1",
                                                    "status": "failed"}))
    for url, extra in ((f"/bulk/{sel}/narrow", {}),
                       ("/bulk/select", {"action": "skip", "all_matching": "1",
                                         "status": "failed"})):
        response = post_form(operator, url, {**extra, field: value})
        assert response.status_code == 400, (url, response.status_code)
        text = html.unescape(response.get_data(as_text=True))
        assert f"not {value!r}. Nothing was changed." in text
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*) FROM console_selections").fetchone()[0] == 1
    assert {job_row(clean_db, i)["status"] for ids in aged_failures.values() for i in ids} \
        == {"failed"}
    # The last moment datetime holds, in UTC, is a bound like any other.
    response = post_form(operator, f"/bulk/{sel}/narrow",
                         {field: "9999-12-31T23:59:59+00:00" if field == "failed_to"
                          else "0001-01-01T00:00:00-00:00"})
    assert response.status_code == 303 and "/bulk/" in response.headers["Location"]
