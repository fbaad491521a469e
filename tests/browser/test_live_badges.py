"""The navigation's badges keep themselves current on a page left open (they refresh as
often as the overview's tiles, whose figures they then agree with), and the bulk page's
"started … ago" moves on while it runs; without JavaScript every page still renders its
badges as they were."""

from __future__ import annotations

import psycopg
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import checked_page

pytestmark = pytest.mark.browser


def add_failed(url: str, n: int, code: str = "LATE") -> None:
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO background_jobs (queue, type, payload, status, attempts, "
                     "last_error_code, failed_at) SELECT 'email', 'send_email', '{}', "
                     "'failed', 3, %s, now() FROM generate_series(1, %s)", [code, n])


def failed_now(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM background_jobs "
                            "WHERE status = 'failed'").fetchone()[0]


def test_the_badges_follow_the_tables_on_a_page_left_open(page, sign_in, clean_db):
    add_failed(clean_db, 3)
    sign_in("vera")  # the overview: its tiles refresh themselves too
    badge = page.get_by_test_id("nav-badge-failed")
    tile = page.get_by_test_id("count-failed").locator(".tile-value")
    expect(badge).to_have_text("3")
    expect(tile).to_have_text("3")
    page.evaluate("() => { window.notReloaded = true; }")

    add_failed(clean_db, 40)
    # Within the refresh period (2 s here) both show the new count: never disagreeing
    # for longer than that.
    expect(badge).to_have_text(str(failed_now(clean_db)), timeout=10_000)
    expect(tile).to_have_text(str(failed_now(clean_db)), timeout=10_000)
    assert page.evaluate("() => window.notReloaded") is True

    # On a page with no live list of its own (the audit log), the badges still refresh:
    # one appears when its count leaves 0, and goes when it comes back to it.
    page.goto("/audit")
    expect(page.get_by_test_id("nav-badge-review")).to_have_count(0)
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE background_jobs SET status = 'unknown' WHERE id = "
                     "(SELECT min(id) FROM background_jobs)")
    expect(page.get_by_test_id("nav-badge-review")).to_have_text("1", timeout=10_000)
    expect(page.get_by_test_id("nav-badge-failed")).to_have_text(str(failed_now(clean_db)))
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE background_jobs SET status = 'completed' WHERE status <> 'pending'")
    expect(page.get_by_test_id("nav-badge-failed")).to_have_count(0, timeout=10_000)
    expect(page.get_by_test_id("nav-badge-review")).to_have_count(0)
    expect(page.locator("#main-nav")).to_contain_text("Failed")  # the link stays


def test_without_javascript_the_badges_render_as_the_page_was(browser, live_console, users,
                                                              clean_db):
    add_failed(clean_db, 7)
    with checked_page(browser, live_console, java_script_enabled=False) as page:
        page.goto("/login")
        page.get_by_label("User name").fill("vera")
        page.get_by_label("Password").fill("correct horse battery")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda url: "/login" not in url)
        page.goto("/failed")
        expect(page.get_by_test_id("nav-badge-failed")).to_have_text("7")
        expect(page.get_by_test_id("nav-badges-poll")).to_be_hidden()
        add_failed(clean_db, 1)
        page.reload()  # no script: a reload is what refreshes it
        expect(page.get_by_test_id("nav-badge-failed")).to_have_text("8")
