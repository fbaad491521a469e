"""Every page fits the screen at 1440, 1280 and 390 px: nothing scrolls the page sideways.

Measured in Chromium: the document's scrollWidth against its clientWidth, and on the
overview each count table against the column it sits in (so UNKNOWN and TOTAL show
without a horizontal scroll on a laptop). On a phone a wide table may scroll inside its
card, never the page, and the navigation collapses behind a Menu toggle.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from jobwarden.console.data import sample_data

pytestmark = pytest.mark.browser

WIDTHS = (1440, 1280, 390)


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        return sample_data.seed_console_scenario(conn)


def page_paths(ids: dict) -> list[str]:
    return ["/", "/failed", "/failed/group?code=AUTH_FAILED", "/jobs", "/queues", "/review",
            "/workers", "/sla", "/audit", "/audit/actions", "/types/send_email", "/users",
            f"/jobs/{ids['auth_failed'][0]}",
            f"/jobs/{ids['running']}", f"/jobs/{ids['unknown']}"]


OVERFLOW = """() => {
  const doc = document.documentElement;
  const wide = [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > doc.clientWidth + 1
                 && getComputedStyle(e).position !== 'absolute')
    .filter(e => !e.closest('.panel, .card, .table-wrap, .two-col > *, .three-col > *')
                 || e.matches('.panel, .card'))
    .slice(0, 5).map(e => e.tagName + '.' + e.className);
  return {scroll: doc.scrollWidth, client: doc.clientWidth, wide};
}"""


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_scrolls_sideways(page, sign_in, scenario, width):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("ada")
    for path in page_paths(scenario):
        page.goto(path)
        fit = page.evaluate(OVERFLOW)
        assert fit["scroll"] <= fit["client"], (width, path, fit)


@pytest.mark.parametrize("width", (1440, 1280))
def test_overview_count_tables_fit_their_column(page, sign_in, scenario, width):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("vera")
    tables = page.locator("table.counts")
    expect(tables).to_have_count(2)
    for i in range(2):
        sizes = tables.nth(i).evaluate(
            "t => ({table: t.scrollWidth, column: t.parentElement.clientWidth})")
        assert sizes["table"] <= sizes["column"], (width, i, sizes)
    # The total column is not cut off on the right (below the first screen is fine: the
    # overview's tiles come first, and a row of them more pushes the tables down).
    right = page.locator("table.counts th", has_text="total").first.evaluate(
        "th => th.getBoundingClientRect().right")
    assert right <= width, (width, right)


def test_phone_navigation_collapses_behind_a_menu(page, sign_in, scenario):
    page.set_viewport_size({"width": 390, "height": 800})
    sign_in("vera")
    nav_link = page.locator("#main-nav").get_by_role("link", name="Failed")
    expect(nav_link).to_be_hidden()
    page.get_by_test_id("nav-toggle").click()
    expect(nav_link).to_be_visible()
    nav_link.click()
    page.wait_for_url("**/failed")


# Every text of each chart lies inside the chart's viewBox (an SLA y-axis label such as
# "1m 54s" was cut to "m 54s", the trend chart's "last min" to "last m").
CHART_LABELS = """(selector) => [...document.querySelectorAll(selector)].flatMap(svg => {
  const box = svg.viewBox.baseVal;
  return [...svg.querySelectorAll('text')].map(t => {
    const b = t.getBBox();
    return {text: t.textContent, inside: b.x >= box.x - 0.5
            && b.x + b.width <= box.x + box.width + 0.5};
  });
})"""


def test_every_sla_chart_label_shows_whole(page, sign_in, engine):
    with engine.begin() as conn:
        for ago in (114, 30, 5):  # oldest waits of a minute and more: "1m 54s" on the axis
            sample_data.insert_job(conn, "send_email", "pending", queue="email", ago=ago)
    sign_in("ada")
    page.goto("/sla")
    labels = page.evaluate(CHART_LABELS, "svg.sla-chart")
    assert any(re.fullmatch(r"\d+m \d+s", label["text"]) for label in labels), labels
    assert [label for label in labels if not label["inside"]] == []


@pytest.mark.parametrize("width", [1440, 390])
def test_every_trend_chart_label_shows_whole(page, sign_in, scenario, width):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("ada")
    page.goto("/")
    labels = page.evaluate(CHART_LABELS, "svg.trend-chart")
    assert {"last min", "-1h"} <= {label["text"] for label in labels}, labels
    assert [label for label in labels if not label["inside"]] == []
