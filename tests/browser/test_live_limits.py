"""Live limits in Chromium: an operator limits a queue from the Queues page, sees who set
it, then clears it; the database holds what the page said."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobwarden import enqueue
from tests.helpers import scalar

pytestmark = pytest.mark.browser


def test_an_operator_limits_a_queue_and_clears_it_from_the_queues_page(page, sign_in, conn,
                                                                        clean_db):
    enqueue(conn, "mail", {}, queue="email")
    conn.commit()
    sign_in("otto")
    page.goto("/queues")
    row = page.locator("tr[data-queue=email]")
    row.get_by_text("Limit…").click()
    form = row.locator("form[data-action=set_limit]")
    form.get_by_label("Max at once").fill("2")
    form.get_by_label("Rate").fill("30/m")
    form.get_by_label("Reason").fill("provider asks us to slow down")
    form.get_by_role("button", name="Set limit").click()
    expect(page.get_by_test_id("flash-ok")).to_contain_text("at most 2 at once and 30/m")
    limit = page.locator("tr[data-limit='queue:email']")
    expect(limit.get_by_test_id("limit-rate")).to_have_text("30/m (burst 1)")
    expect(limit.get_by_test_id("limit-set-by")).to_have_text("otto")
    expect(page.locator("tr[data-queue=email]").get_by_test_id("queue-limit")
           ).to_contain_text("max 2 at once")
    assert scalar(clean_db, "SELECT (max_concurrency, rate * 60)::text FROM "
                            "job_limit_controls") == "(2,30)"
    clear = limit.locator("form[data-action=clear_limit]")
    clear.get_by_label("Reason").fill("provider fine again")
    clear.get_by_role("button", name="Clear live limit").click()
    expect(page.get_by_test_id("flash-ok")).to_contain_text("cleared")
    expect(page.get_by_test_id("limits")).to_contain_text("No queue or job type is limited.")
    assert scalar(clean_db, "SELECT array_agg(action ORDER BY id) FROM job_audit"
                  ) == ["set_limit", "clear_limit"]
