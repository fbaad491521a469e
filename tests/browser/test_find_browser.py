"""Finding and deciding at scale in Chromium: a jump to a job and a time range on the jobs
list, suggestions in the filters, and a group of Needs review decided from its row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from jobwarden.console.data import sample_data
from tests.helpers import job_row

pytestmark = pytest.mark.browser

OLD = datetime(2021, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def history(engine):
    """60 jobs a minute apart from OLD, then 200 newer ones: an old job far down the list."""
    with engine.begin() as conn:
        old = [sample_data.insert_job(conn, "sync_crm", "completed",
                                      created_at=OLD + timedelta(minutes=i))
               for i in range(60)]
        for _ in range(200):
            sample_data.insert_job(conn, "send_email", "completed")
    return old


def test_a_jump_and_a_time_range_reach_an_old_job_in_one_request(page, sign_in, history):
    sign_in("vera")
    page.goto("/jobs")
    expect(page.get_by_test_id("suggest-types").locator("option")).to_have_count(2)
    expect(page.get_by_label("Type")).to_have_attribute("list", "suggest-types")
    target = history[10]
    page.get_by_test_id("jump-to").fill(f"#{target}")
    page.get_by_role("button", name="Jump").click()
    expect(page.locator("tr[data-job-id]").first).to_have_attribute("data-job-id", str(target))
    page.goto("/jobs")
    page.get_by_test_id("created-from").fill("2021-06-01T12:05:00")
    page.get_by_test_id("created-to").fill("2021-06-01T12:08:00")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("tr[data-job-id]")
    expect(rows).to_have_count(3)
    assert [int(rows.nth(i).get_attribute("data-job-id")) for i in range(3)] == \
        history[7:4:-1]


@pytest.fixture
def unknown_groups(engine):
    with engine.begin() as conn:
        def unknown(code, n):
            return [sample_data.insert_job(conn, "charge_card", "unknown",
                                           last_error_code=code,
                                           error="connection reset after sending")
                    for _ in range(n)]

        return {"gateway": unknown("GATEWAY_TIMEOUT", 4), "bank": unknown("BANK_SILENT", 2)}


def test_a_group_is_decided_from_its_row_through_the_review(page, sign_in, unknown_groups,
                                                            clean_db):
    sign_in("otto")
    page.goto("/review")
    gateway = unknown_groups["gateway"]
    row = page.locator(f'tr[data-group-of="{gateway[-1]}"]')
    expect(row.get_by_test_id("group-code")).to_have_text("GATEWAY_TIMEOUT")
    expect(row.get_by_test_id("group-jobs")).to_have_text("4")
    row.get_by_test_id("group-mark_completed").click()
    expect(page.get_by_test_id("selected-count")).to_have_text("4")
    page.get_by_label("Reason").fill("the gateway's ledger shows all four")
    page.get_by_role("button", name="Mark completed 4 job(s)").click()
    expect(page.get_by_test_id("bulk-count")).to_have_text("4")
    assert {job_row(clean_db, i)["status"] for i in gateway} == {"completed"}
    assert {job_row(clean_db, i)["status"] for i in unknown_groups["bank"]} == {"unknown"}
