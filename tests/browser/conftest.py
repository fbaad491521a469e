"""A live console on the test database, Chromium driven by Playwright, a real worker.

Playwright cannot download browsers here: it drives Debian's /usr/bin/chromium.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from jobwarden.console.cli.server import make_server

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("JOBWARDEN_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="session")
def live_console(database_url):
    """The console served by a threaded werkzeug server on a free port."""
    server = make_server("127.0.0.1", 0, config={
        "DATABASE_URL": database_url, "SECRET_KEY": "browser-tests",
        "JOB_POLL_SECONDS": 1, "OVERVIEW_POLL_SECONDS": 2,
    })
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.app.extensions["jobwarden_db"].dispose()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield chromium
        chromium.close()


@contextmanager
def checked_page(browser, base_url: str, **options):
    """A fresh browser context (no cookies; `options` for Playwright's new_context) whose
    CSP violations and script errors fail the test when it closes."""
    context = browser.new_context(base_url=base_url, **options)
    context.set_default_timeout(10_000)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text)
            if m.type == "error" and "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    yield page
    context.close()
    assert not problems, f"browser errors: {problems}"


@pytest.fixture
def page(browser, live_console, users):
    """A fresh page on the live console (see checked_page)."""
    with checked_page(browser, live_console) as page:
        yield page


@pytest.fixture
def sign_in(page):
    def sign_in_as(username: str, password: str = "correct horse battery", goto: bool = True):
        if goto:
            page.goto("/login")
        page.get_by_label("User name").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda url: "/login" not in url)
        return page

    return sign_in_as


@pytest.fixture
def start_worker(database_url):
    """Start `jobwarden worker` on the browser queue; stopped (SIGTERM) after the test."""
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobwarden.worker.cli", "worker", "--app", "tests.browser.browser_app",
             "--queues", "browser", "--concurrency", "1", "--grace", "5"],
            cwd=ROOT, env={**os.environ, "DATABASE_URL": database_url},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        stop_worker(proc)


def stop_worker(proc: subprocess.Popen) -> None:
    """SIGTERM, as a deploy does; SIGKILL if it has not drained within 15 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
