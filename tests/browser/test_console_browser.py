"""The console in Chromium: what an operator does during an incident, end to end."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from jobwarden.console.data import sample_data
from tests.helpers import job_row

pytestmark = pytest.mark.browser


def status_of(url: str, job_id: int) -> str:
    return job_row(url, job_id)["status"]


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        ids = sample_data.seed_console_scenario(conn)
        ids["browser_failed"] = [
            sample_data.insert_job(conn, "browser_task", "failed", queue="browser",
                                   error_code="PROVIDER_TIMEOUT", error="provider took 31s",
                                   payload={"n": i})
            for i in range(3)]
    return ids


def test_signing_in_shows_the_overview_with_the_right_counts(page, sign_in, scenario):
    page.goto("/jobs")
    expect(page).to_have_url(re.compile(r"/login\?next=/jobs"))
    sign_in("vera", goto=False)  # on the login page the redirect led to
    expect(page).to_have_url(re.compile(r"/jobs$"))
    page.goto("/")
    for status, count in [("failed", 12), ("pending", 27), ("running", 2), ("completed", 52),
                          ("unknown", 1)]:
        expect(page.get_by_test_id(f"count-{status}")).to_contain_text(str(count))
    expect(page.locator("#overview-health")).to_contain_text("w-app3-2")  # stale heartbeat


def test_retrying_a_failed_job_from_its_group_until_a_worker_completes_it(
        page, sign_in, scenario, clean_db, start_worker):
    sign_in("otto")
    page.locator("#main-nav").get_by_role("link", name="Failed").click()
    page.get_by_role("link", name="PROVIDER_TIMEOUT").click()
    expect(page.get_by_test_id("preview-count")).to_have_text("3")
    job_id = scenario["browser_failed"][0]
    page.get_by_role("link", name=f"#{job_id}", exact=True).click()
    form = page.locator("form[data-action=retry]")
    form.get_by_label("Reason").fill("provider is back up")
    form.get_by_role("button", name="Retry").click()
    expect(page.get_by_test_id("flash-ok")).to_contain_text("back in pending")
    expect(page.get_by_test_id("job-status")).to_have_text("pending")
    audit = page.get_by_test_id("job-audit")
    expect(audit).to_contain_text("otto")
    expect(audit).to_contain_text("provider is back up")
    expect(audit).to_contain_text("failed → pending")
    page.goto("/audit?actor=otto")
    expect(page.get_by_test_id("audit-log")).to_contain_text("provider is back up")
    page.goto(f"/jobs/{job_id}")
    start_worker()
    # no reload: the live panel polls until the job is terminal, then stops
    expect(page.get_by_test_id("job-status")).to_have_text("completed", timeout=30_000)
    expect(page.locator("#job-live")).to_have_attribute("data-live", "no")
    expect(page.get_by_test_id("attempts-timeline")).to_contain_text("completed")
    assert status_of(clean_db, job_id) == "completed"


def test_bulk_skipping_a_whole_group(page, sign_in, scenario, clean_db):
    sign_in("otto")
    page.goto("/failed/group?code=AUTH_FAILED")
    expect(page.get_by_test_id("preview-count")).to_have_text("6")
    page.get_by_role("button", name="Skip 6 job(s)…").click()
    expect(page.get_by_test_id("selected-count")).to_have_text("6")
    form = page.locator("form[data-action=bulk-skip]")
    form.get_by_label("Reason").fill("credentials rotated; emails resent by hand")
    form.get_by_role("button", name="Skip 6 job(s)").click()
    expect(page.get_by_test_id("flash-ok")).to_contain_text("Skipped 6 of 6 selected job(s)")
    expect(page.get_by_test_id("bulk-count")).to_have_text("6")
    page.goto("/failed")
    expect(page.locator('tr[data-error-code="AUTH_FAILED"]')).to_have_count(0)
    assert {status_of(clean_db, i) for i in scenario["auth_failed"]} == {"skipped"}


def test_a_viewer_sees_no_action_buttons_and_a_forged_post_gets_403(page, sign_in, scenario,
                                                                    clean_db):
    sign_in("vera")
    job_id = scenario["auth_failed"][0]
    page.goto(f"/jobs/{job_id}")
    expect(page.get_by_test_id("job-status")).to_have_text("failed")
    expect(page.locator("form.action-form")).to_have_count(0)
    page.goto("/failed/group?code=AUTH_FAILED")
    expect(page.locator("form.action-form")).to_have_count(0)
    token = page.locator("input[name=csrf_token]").first.get_attribute("value")
    response = page.request.post(f"/jobs/{job_id}/retry", form={
        "csrf_token": token, "reason": "forged", "request_id": "forged-1"})
    assert response.status == 403
    assert status_of(clean_db, job_id) == "failed"


def test_a_script_in_a_payload_or_a_name_renders_inert(page, sign_in, engine):
    with engine.begin() as conn:
        job_id = sample_data.insert_job(
            conn, "<img src=x onerror=window.pwned=1>", "failed", queue="<b>q</b>",
            error_code="<script>window.pwned=2</script>",
            error="<svg onload=window.pwned=3>",
            payload={"html": "<script>window.pwned=4</script>", "token": "abc123secret"})
    sign_in("vera")
    for path in (f"/jobs/{job_id}", "/failed", "/jobs", "/"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.pwned") is None, path
    page.goto(f"/jobs/{job_id}")
    payload = page.get_by_test_id("payload")
    expect(payload).to_contain_text("<script>window.pwned=4</script>")  # shown as text
    expect(payload).not_to_contain_text("abc123secret")


def test_a_request_without_a_csrf_token_changes_nothing(page, sign_in, scenario, clean_db):
    sign_in("otto")
    job_id = scenario["auth_failed"][1]
    response = page.request.post(f"/jobs/{job_id}/retry",
                                 form={"reason": "no token", "request_id": "nt-1"})
    assert response.status == 400
    htmx_like = page.request.post(f"/jobs/{job_id}/skip", headers={"HX-Request": "true"},
                                  form={"reason": "no token", "request_id": "nt-2"})
    assert htmx_like.status == 400
    assert status_of(clean_db, job_id) == "failed"
