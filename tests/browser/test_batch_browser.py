"""A batch page in real Chromium: reached from the navigation, its bar drawn by the server,
and "Retry the failed members" driven through the bulk review (reason, canary, continue)
to its end, after which the page counts the members unfinished again."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.batch_support import seed_batches
from tests.helpers import job_row

pytestmark = pytest.mark.browser


def test_an_operator_retries_a_batchs_failed_members_through_the_review(
        page, sign_in, clean_db):
    seeded = seed_batches(clean_db)
    a = seeded.batch["a"]
    sign_in("otto")
    page.locator("#main-nav").get_by_role("link", name="Batches").click()
    page.locator(f"tr[data-batch-id='{a}'] a[href='/batches/{a}']").click()
    counts = page.get_by_test_id("batch-counts")
    expect(counts.locator("[data-state='failed']")).to_have_text("2")
    expect(counts.locator("[data-state='unfinished']")).to_have_text("4")
    bar = page.get_by_test_id("batch-bar")
    expect(bar.locator("rect.batch-seg")).to_have_count(6)  # every state holds members
    fill = bar.locator("rect.batch-failed").evaluate(
        "e => getComputedStyle(e).getPropertyValue('fill')")
    assert fill == "rgb(198, 40, 40)"  # --bad

    page.get_by_test_id("batch-retry").click()
    expect(page.get_by_test_id("selected-count")).to_have_text("2")
    page.get_by_label("Reason").fill("rows fixed at the source")
    expect(page.get_by_test_id("canary-size")).to_have_value("1")
    page.get_by_test_id("start-canary").click()
    expect(page.get_by_test_id("bulk-state")).to_contain_text("The canary is done")
    page.get_by_test_id("bulk-continue").click()
    expect(page.get_by_test_id("bulk-state")).to_contain_text("Done")
    expect(page.get_by_test_id("bulk-changed")).to_have_text("2")
    assert [job_row(clean_db, i)["status"] for i in seeded.members["a"]["bad"]] == \
        ["pending", "pending"]

    page.goto(f"/batches/{a}")
    expect(counts.locator("[data-state='failed']")).to_have_text("0")
    expect(counts.locator("[data-state='unfinished']")).to_have_text("6")
    expect(page.get_by_test_id("batch-retry")).to_have_count(0)
