"""Schedules edited in Chromium: an admin opens a schedule's edit form, types a cron the
console refuses and sees the worker's one-line refusal at once, types a good one and sees
its next five runs in its zone, saves, and the row says the console edit overrides the
code. The page fits the screen with its forms."""

from __future__ import annotations

import psycopg
import pytest
from playwright.sync_api import expect

from jobwarden.worker.duties.scheduler import publish
from jobwarden.worker.jobs.job_types import publish_job_types
from tests.integration.test_console_schedule_edits import app_registry

pytestmark = pytest.mark.browser


def published(url: str) -> None:
    reg = app_registry()
    with psycopg.connect(url) as conn:
        publish_job_types(conn, list(reg), published_by="w1")
        publish(conn, reg, "w1")


def test_an_admin_edits_a_schedule_with_a_live_preview(page, sign_in, clean_db):
    published(clean_db)
    sign_in("ada")
    page.goto("/schedules")
    row = page.locator("tr[data-schedule=nightly_report]")
    expect(row.get_by_test_id("preview-tick")).to_have_count(5)
    row.get_by_text("Edit…").click()
    edit = row.locator("form[data-action=edit_schedule]")
    edit.get_by_label("Cron").fill("* * * * * *")
    expect(edit.get_by_test_id("schedule-preview-error")).to_contain_text(
        "fires more than once a minute")
    edit.get_by_label("Cron").fill("30 2 * 3,10 0L")
    expect(edit.get_by_test_id("preview-tick")).to_have_count(5)
    expect(edit.get_by_test_id("preview-dst")).to_have_count(5)
    edit.get_by_label("Reason").fill("DST drill")
    edit.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("flash-ok")).to_contain_text("Schedule 'nightly_report' saved")
    row = page.locator("tr[data-schedule=nightly_report]")
    expect(row.get_by_test_id("schedule-source")).to_contain_text(
        "a console edit by ada overrides it until removed")
    expect(row.get_by_test_id("schedule-cron")).to_have_text("30 2 * 3,10 0L")


@pytest.mark.parametrize("width", (1440, 390))
def test_the_page_fits_the_screen_with_its_forms(page, sign_in, clean_db, width):
    published(clean_db)
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("ada")
    page.goto("/schedules")
    expect(page.locator("tr[data-schedule]")).to_have_count(1)
    fit = page.evaluate("() => ({scroll: document.documentElement.scrollWidth, "
                        "client: document.documentElement.clientWidth})")
    assert fit["scroll"] <= fit["client"], (width, fit)
