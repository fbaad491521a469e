"""Lists that keep themselves current in Chromium: the Jobs list refreshes its rows (never
under a ticked row) and shows when a pending job runs; the trend chart filters by type."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from jobwarden.console.data import sample_data

pytestmark = pytest.mark.browser


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        return sample_data.seed_console_scenario(conn)


def add_job(engine, **fields) -> int:
    with engine.begin() as conn:
        return sample_data.insert_job(conn, "late_arrival", "pending", queue="email", **fields)


def test_the_jobs_list_refreshes_itself_but_never_under_a_ticked_row(page, sign_in, scenario,
                                                                    engine):
    sign_in("otto")
    page.goto("/jobs?queue=email")
    first = add_job(engine)
    # The list's own refresh brings the new job in, the page never reloaded.
    row = page.locator(f'tr[data-job-id="{first}"]')
    expect(row).to_be_visible(timeout=15_000)
    expect(row.get_by_test_id("row-scheduled").locator("time")).to_be_visible()
    # A ticked row holds the refresh: the operator's selection stays as it is.
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url)
            if r.headers.get("hx-request") and "/jobs?" in r.url else None)
    row.get_by_role("checkbox").check()
    second = add_job(engine)
    page.wait_for_timeout(5_000)  # more than two of the list's 2-second polls
    assert polls == []
    expect(page.locator(f'tr[data-job-id="{second}"]')).to_have_count(0)
    expect(row.get_by_role("checkbox")).to_be_checked()
    row.get_by_role("checkbox").uncheck()
    expect(page.locator(f'tr[data-job-id="{second}"]')).to_be_visible(timeout=15_000)


def test_the_trend_chart_filters_by_type_in_place(page, sign_in, scenario):
    sign_in("vera")
    expect(page.get_by_test_id("trend-chart")).to_be_visible()
    page.get_by_test_id("trend-type").select_option("send_email")
    expect(page.get_by_test_id("trends")).to_contain_text("type send_email")
    expect(page.locator("#overview-trends-body")).to_have_attribute(
        "hx-get", re.compile("type=send_email"))
    expect(page.get_by_test_id("rates-window")).to_contain_text("the last 10 full minutes")
