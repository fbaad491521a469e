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


@pytest.fixture
def durations(engine):
    """Executions of report.build in three 5-minute buckets (one of them alone, between
    two empty ones), a version first run an hour ago and a worker started then."""
    with engine.begin() as conn:
        conn.exec_driver_sql("""
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                                        scheduled_at, started_at, finished_at, outcome,
                                        duration_ms)
            SELECT g, gen_random_uuid(), 1, 'reports', 'report.build', 'w-new',
                   f - interval '1 s', f - d * interval '1 ms', f, 'completed', d
            FROM generate_series(1, 30) AS g,
                 LATERAL (SELECT now() - (CASE WHEN g <= 10 THEN 2 WHEN g <= 20 THEN 3
                                               ELSE 35 END) * interval '5 minutes' AS f,
                                 (g * 37 %% 500 + 20)::float8 AS d) x""")
        conn.exec_driver_sql("""
            INSERT INTO job_type_versions (type, version, first_at, first_by)
            VALUES ('report.build', 2, now() - interval '3 hours', 'w-new')""")
        conn.exec_driver_sql("""
            INSERT INTO job_workers (worker_id, host, pid, queues, job_types, concurrency,
                                     version, started_at)
            VALUES ('w-new', 'host', 1, '{reports}', '{report.build}', 4, 'test',
                    now() - interval '3 hours')""")


def test_the_duration_chart_draws_without_javascript(no_script_page, durations):
    page = no_script_page
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto("/login")
    page.get_by_label("User name").fill("vera")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/login" not in url)
    page.goto("/types/report.build")
    assert page.evaluate("() => typeof window.htmx") == "undefined"  # no script ran
    chart = page.get_by_test_id("duration-chart")
    expect(chart).to_be_visible()
    assert chart.bounding_box()["height"] > 150  # scaled to the page, not collapsed
    # Three buckets with executions: a hover target each; each series one run of two
    # neighbouring buckets and one lone bucket drawn as a dash.
    expect(chart.locator("rect.hover")).to_have_count(3)
    for series in ("p50", "p95"):
        expect(chart.locator(f'polyline[data-outcome="{series}"]')).to_have_count(2)
        assert style(page, f'polyline[data-outcome="{series}"]', "fill") == "none"
        assert style(page, f'polyline[data-outcome="{series}"]', "stroke") != "none"
    # p95 is told from p50 by its dashes, not its colour alone.
    assert style(page, 'polyline[data-outcome="p50"]', "stroke-dasharray") == "none"
    assert style(page, 'polyline[data-outcome="p95"]', "stroke-dasharray") != "none"
    expect(chart.locator("line.mark-version")).to_have_count(1)
    expect(chart.locator("text.mark-label")).to_have_text("v2")
    expect(chart.locator("line.mark-start")).to_have_count(1)
    expect(chart.locator("line.mark-version title")).to_contain_text("version 2 first ran")
    expect(page.get_by_test_id("version-mark")).to_contain_text("version 2 first ran")
    # The week, by a plain link (no script): hour buckets, the same marks.
    page.locator('a[data-range="7d"]').click()
    expect(page.get_by_test_id("durations")).to_have_attribute("data-bucket-s", "3600")
    expect(page.get_by_test_id("duration-chart").locator("line.mark-version")).to_have_count(1)
    # On a phone the chart fits the screen: nothing scrolls sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    box = page.get_by_test_id("duration-chart").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
