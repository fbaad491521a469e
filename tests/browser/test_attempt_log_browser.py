"""An attempt's log lines on a job's page, in Chromium: collapsed until asked for, shown
as text (markup in a line is not markup), and a 4,096-character line without a space
wraps at 1440 and 390 px instead of scrolling the page or the lines sideways."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect
from sqlalchemy import text

from jobwarden.console.data import sample_data
from tests.browser.test_console_layout import OVERFLOW

pytestmark = pytest.mark.browser

LONG = "x" * 4096


@pytest.fixture
def logged_job(engine):
    with engine.begin() as conn:
        ids = sample_data.seed_console_scenario(conn)
        job_id = ids["auth_failed"][0]
        execution_id = conn.execute(text(
            "SELECT execution_id FROM job_executions WHERE job_id = :j ORDER BY attempt "
            "LIMIT 1"), {"j": job_id}).scalar_one()
        lines = [[1765000000.25, "INFO", "shop.mail", "<b>not bold</b> sent"],
                 [1765000001.5, "ERROR", "shop.mail", LONG]]
        conn.execute(text(
            "INSERT INTO job_execution_logs (execution_id, job_id, finished_at, lines, "
            "dropped) VALUES (:e, :j, now(), CAST(:l AS jsonb), 3)"),
            {"e": execution_id, "j": job_id, "l": json.dumps(lines)})
    return job_id


@pytest.mark.parametrize("width", (1440, 390))
def test_the_lines_open_on_request_as_text_and_never_widen_the_page(page, sign_in, logged_job,
                                                                      width):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("vera")
    page.goto(f"/jobs/{logged_job}")
    box = page.get_by_test_id("log-1")
    expect(box).to_contain_text("2 lines, 3 lines dropped")
    first = box.get_by_test_id("log-line").first
    expect(first).to_be_hidden()  # collapsed
    box.locator("summary").click()
    expect(first).to_be_visible()
    expect(first).to_contain_text("<b>not bold</b> sent")  # the markup as text
    expect(first.locator("b")).to_have_count(0)
    expect(first).to_contain_text("05:46:40.250")
    fit = page.evaluate(OVERFLOW)
    assert fit["scroll"] <= fit["client"], (width, fit)
    # The long line wraps within the screen: neither the timeline around it nor the
    # lines themselves grow past it (a table grows to fit a cell that cannot wrap).
    # On a phone the timeline's seven columns scroll inside its card, as every wide
    # table does; the line wraps there too, over many lines of its own.
    shape = box.get_by_test_id("log-line").nth(1).evaluate(
        "r => ({right: r.getBoundingClientRect().right, "
        "screen: document.documentElement.clientWidth, "
        "rows: r.querySelector('pre').getBoundingClientRect().height / "
        "r.previousElementSibling.querySelector('pre').getBoundingClientRect().height})")
    assert shape["rows"] > 5, (width, shape)
    if width == 1440:
        assert shape["right"] <= shape["screen"], (width, shape)
