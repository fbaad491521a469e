"""The read replica's notice in Chromium: the overview's polled panels carry the lag out of
band (htmx), so a page left open says how far behind its figures are now, not when it
was opened. On a private primary and streaming standby (tests/integration/test_console_replica.py).
About 5 s: it waits for the overview's polls (1 s apart) three times."""

from __future__ import annotations

import threading

import pytest

from jobwarden.console.cli.server import make_server
from tests.browser.conftest import checked_page
from tests.integration import test_console_replica as replica
from tests.integration.test_console_replica import caught_up, count_failed, failed_jobs, one, pause

# The private primary and standby, and a clean start on them, as the integration tests use.
pair = replica.pair
fresh = replica.fresh

NOTICE = "[data-testid=read-source]"


@pytest.fixture
def replica_console(fresh):
    server = make_server("127.0.0.1", 0, config={
        "DATABASE_URL": fresh.primary.url, "READ_URL": fresh.standby.url,
        "SECRET_KEY": "browser-tests", "OVERVIEW_POLL_SECONDS": 1,
        "READ_RETRY_SECONDS": 0}, access_log=False)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.app.extensions["jobwarden_db"].dispose()
    server.app.extensions["jobwarden_replica"].dispose()


def test_an_open_overview_shows_the_replicas_lag_when_it_falls_behind_and_catches_up(
        browser, replica_console, fresh):
    failed_jobs(fresh.primary.url, 2)
    caught_up(fresh)
    with checked_page(browser, replica_console) as page:
        page.goto("/login")
        page.get_by_label("User name").fill("vera")
        page.get_by_label("Password").fill("correct horse battery")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda url: "/login" not in url)
        notice = page.locator(NOTICE)
        page.wait_for_function("s => document.querySelector(s)?.dataset.source === 'replica'",
                               arg=NOTICE)

        pause(fresh)
        failed_jobs(fresh.primary.url, 1)
        # The counts panel polls every second; its answer replaces the notice in place.
        page.wait_for_function(
            "s => parseFloat(document.querySelector(s).dataset.lagSeconds) > 0", arg=NOTICE)
        assert "behind the primary" in notice.inner_text()
        assert page.locator(NOTICE).count() == 1
        # The figures beside it are the standby's: 2 failed, where the primary has 3.
        assert count_failed(fresh.standby.url) == 2
        assert page.get_by_test_id("count-failed").locator(".tile-value").inner_text() == "2"

        one(fresh.standby.url, "SELECT pg_wal_replay_resume()")
        page.wait_for_function(
            "s => document.querySelector(s).dataset.lagSeconds === '0.000'", arg=NOTICE)
        assert "up to date with the primary" in notice.inner_text()
        page.wait_for_function(
            "s => document.querySelector(s).innerText.trim() === '3'",
            arg="[data-testid=count-failed] .tile-value")
