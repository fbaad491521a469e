"""The overview's trend chart in Chromium: range and queue switch in place; badges show."""

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


def points(page) -> int:
    return len(page.locator('polyline[data-outcome="completed"]').get_attribute("points").split())


def test_the_trend_chart_switches_range_and_queue_in_place(page, sign_in, scenario):
    sign_in("vera")
    chart = page.get_by_test_id("trend-chart")
    expect(chart).to_be_visible()
    assert points(page) == 60
    expect(page.get_by_test_id("nav-badge-failed")).to_have_text("9")
    expect(page.get_by_test_id("nav-badge-review")).to_have_text("1")
    page.get_by_label("Last 24 hours").check()
    expect(page.locator("#overview-trends-body")).to_have_attribute("hx-get", re.compile("range=24h"))
    assert points(page) == 144
    # htmx wires the swapped-in form up as the swap settles; a person cannot change the
    # queue within those milliseconds, a test can.
    expect(page.get_by_test_id("trends")).not_to_have_class(re.compile("htmx-(swapping|settling)"))
    page.get_by_test_id("trend-queue").select_option("reports")
    expect(page.get_by_test_id("trends")).to_contain_text("queue reports")
    expect(page.get_by_test_id("rate-completed")).to_be_visible()
    box = chart.bounding_box()
    panel = page.get_by_test_id("trends").bounding_box()
    assert box["width"] >= panel["width"] * 0.9  # the chart fills its card
