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


# How many lines an element's text takes: one client rect per line box of its text.
LINES = "e => { const r = document.createRange(); r.selectNodeContents(e); " \
        "return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }"


@pytest.mark.parametrize("width", [1440, 390])
def test_alert_state_pills_take_one_line(page, sign_in, scenario, width):
    """A state pill ("FIRING", "ok") broke letter by letter in a narrow column."""
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("vera")
    pills = page.get_by_test_id("alert-state")
    expect(pills.first).to_be_visible()
    assert pills.count() >= 5
    for i in range(pills.count()):
        pill = pills.nth(i)
        assert (pill.inner_text(), pill.evaluate(LINES)) == (pill.inner_text(), 1)


@pytest.mark.parametrize("width", [1440, 390])
def test_the_sign_in_form_is_a_card_of_bounded_width(page, width):
    """The sign-in card filled the whole width at 1440 (the first screen an alert opens)."""
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/login")
    box = page.locator("section.login").bounding_box()
    assert box["width"] <= 400, box
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
    if width > 500:  # centred on a wide screen
        assert abs(box["x"] - (width - box["x"] - box["width"])) <= 2, box


def test_failed_keeps_every_column_in_view_on_a_phone(page, sign_in, scenario, engine):
    """At 390 px Failed's next-attempt and sample columns scrolled off to the right."""
    with engine.begin() as conn:
        sample_data.seed_retry_storm(conn)
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in("vera")
    page.goto("/failed")
    cells = page.locator("#failed-live tbody td")
    expect(page.get_by_test_id("retrying-next").first).to_be_visible()
    boxes = cells.evaluate_all(
        "cs => cs.map(c => { const b = c.getBoundingClientRect();"
        " return {text: c.innerText.slice(0, 30), left: b.left, right: b.right}; })")
    assert len(boxes) > 20
    assert [b for b in boxes if b["left"] < 0 or b["right"] > 390] == []
