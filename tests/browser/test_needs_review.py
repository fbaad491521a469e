"""Needs review in Chromium: payload and error per card, one reason box, and a bulk decision."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobwarden.console.data import sample_data
from tests.helpers import job_row

pytestmark = pytest.mark.browser


@pytest.fixture
def unknown_jobs(engine):
    with engine.begin() as conn:
        return [sample_data.insert_job(conn, "charge_card", "unknown", queue="default",
                                       payload={"orderId": 7100 + i, "card_token": "tok_secret"},
                                       error=f"connection reset after sending charge {i}")
                for i in range(3)]


def test_one_reason_box_decides_a_job_and_a_selection_is_decided_together(
        page, sign_in, unknown_jobs, clean_db):
    sign_in("otto")
    page.goto("/review")
    first, second, third = unknown_jobs
    card = page.locator(f'section.review-item[data-job-id="{first}"]')
    expect(card.get_by_test_id("review-payload")).to_contain_text("7100")
    expect(card.get_by_test_id("review-payload")).not_to_contain_text("tok_secret")
    expect(card).to_contain_text("connection reset after sending charge 0")
    expect(card.get_by_label("Reason")).to_have_count(1)
    card.get_by_label("Reason").fill("provider shows the charge")
    card.get_by_role("button", name="Mark completed").click()
    expect(page.get_by_test_id("flash-ok")).to_be_visible()
    assert job_row(clean_db, first)["status"] == "completed"

    for job_id in (second, third):
        page.get_by_label(f"select job #{job_id}").check()
    page.get_by_test_id("select-action").select_option("mark_failed")
    page.get_by_test_id("review-selection").click()
    expect(page.get_by_test_id("selected-count")).to_have_text("2")
    page.get_by_label("Reason").fill("provider has no record of either")
    page.get_by_role("button", name="Mark failed 2 job(s)").click()
    expect(page.get_by_test_id("bulk-count")).to_have_text("2")
    assert {job_row(clean_db, i)["status"] for i in (second, third)} == {"failed"}
