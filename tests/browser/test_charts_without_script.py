"""Every chart draws with JavaScript turned off: the SLA bars, the trend lines and the
failed groups' sparklines are SVG from the server, styled by the console's CSS."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from jobwarden.console.data import sample_data
from tests.browser.conftest import checked_page

pytestmark = pytest.mark.browser

#: static/console.css: the SLA chart's colours (no script and no inline style sets them).
GREEN, RED = "rgb(46, 125, 111)", "rgb(198, 40, 40)"


@pytest.fixture
def no_script_page(browser, live_console, users):
    with checked_page(browser, live_console, java_script_enabled=False) as page:
        yield page


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        ids = sample_data.seed_console_scenario(conn)
        conn.exec_driver_sql("""
            INSERT INTO job_types (type, queue, max_attempts, lease_seconds, backoff,
                                   sla_seconds, version, repeat_safe, published_by)
            VALUES ('send_email', 'email', 3, 30, '{}', 30, 1, true, 'test')""")
        sample_data.insert_job(conn, "send_email", "pending", queue="email", ago=300)
    return ids


def style(page: Page, selector: str, prop: str) -> str:
    return page.locator(selector).first.evaluate(
        f"e => getComputedStyle(e).getPropertyValue('{prop}')")


def test_the_charts_draw_without_javascript(no_script_page, scenario):
    page = no_script_page
    page.goto("/login")
    page.get_by_label("User name").fill("vera")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/login" not in url)
    assert page.evaluate("() => typeof window.htmx") == "undefined"  # no script ran

    page.goto("/sla")
    card = page.locator("#sla-send_email svg.sla-chart")
    expect(card).to_be_visible()
    expect(card.locator("rect")).to_have_count(12)
    assert card.bounding_box()["height"] > 40  # scaled to its card, not collapsed
    assert style(page, "#sla-send_email rect.bar-breach", "fill") == RED
    assert style(page, "svg.sla-chart rect.bar:not(.bar-breach)", "fill") == GREEN
    assert style(page, "svg.sla-chart text", "font-size") == "8px"
    expect(card.locator("rect.bar-breach title").first).to_contain_text("over target")

    page.goto("/")
    trend = page.get_by_test_id("trend-chart")
    expect(trend).to_be_visible()
    for outcome in ("completed", "failed", "retried"):
        line = trend.locator(f'polyline[data-outcome="{outcome}"]')
        assert len(line.get_attribute("points").split()) == 60
        assert style(page, f'polyline[data-outcome="{outcome}"]', "fill") == "none"
    expect(trend.locator("rect.hover")).to_have_count(60)

    page.goto("/failed")
    spark = page.get_by_test_id("sparkline").first
    expect(spark).to_be_visible()
    assert spark.bounding_box()["width"] > 0
    assert style(page, "svg.spark polyline", "fill") == "none"
