"""The flow page and the cancel-with-dependents form in real Chromium: the graph draws
without script, its boxes lead to their jobs, and an operator's cancel of a parent, with
"cancel them" chosen, cancels its waiting dependents."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobwarden.console.data import sample_data
from tests.browser.conftest import checked_page
from tests.helpers import job_row

pytestmark = pytest.mark.browser


@pytest.fixture
def flow(engine):
    """A pending export; two waiting steps after it, and a mail after both."""
    with engine.begin() as conn:
        ids = {"export": sample_data.insert_job(conn, "report.export", "pending")}
        for n in (1, 2):
            ids[f"step{n}"] = sample_data.insert_job(conn, "report.step", "waiting")
            sample_data.insert_edge(conn, ids[f"step{n}"], ids["export"])
        ids["mail"] = sample_data.insert_job(conn, "report.mail", "waiting")
        for n in (1, 2):
            sample_data.insert_edge(conn, ids["mail"], ids[f"step{n}"])
    return ids


def test_the_flow_page_draws_without_javascript(browser, live_console, users, flow):
    with checked_page(browser, live_console, java_script_enabled=False) as page:
        page.goto("/login")
        page.get_by_label("User name").fill("vera")
        page.get_by_label("Password").fill("correct horse battery")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda url: "/login" not in url)
        page.goto(f"/jobs/{flow['mail']}")
        page.get_by_test_id("flow-link").click()
        graph = page.get_by_test_id("flow-graph")
        expect(graph).to_be_visible()
        expect(graph.locator("rect.flow-box")).to_have_count(4)
        expect(graph.locator("polyline.flow-edge")).to_have_count(4)
        # States in words in every box, not colour alone; the colours from the CSS.
        expect(graph.locator("text.flow-status")).to_have_text(
            ["pending", "waiting", "waiting", "waiting"])
        fill = graph.locator("rect.flow-pending").evaluate(
            "e => getComputedStyle(e).getPropertyValue('fill')")
        assert fill == "rgb(238, 244, 255)"
        assert graph.bounding_box()["height"] > 100  # three layers, not collapsed
        expect(page.get_by_test_id("flow-legend")).to_contain_text("waiting")
        # The parents are drawn above their dependents.
        ys = {t: graph.locator(f"text:has-text('#{flow[t]} ')").bounding_box()["y"]
              for t in ("export", "step1", "mail")}
        assert ys["export"] < ys["step1"] < ys["mail"]
        graph.locator("a:has(rect[class*='flow-box']) >> nth=0").click()
        page.wait_for_url(f"**/jobs/{flow['export']}")


def test_an_operator_cancels_a_parent_and_its_dependents(page, sign_in, flow, clean_db):
    sign_in("otto")
    page.goto(f"/jobs/{flow['export']}")
    form = page.locator("form[data-action='cancel']")
    expect(form.get_by_test_id("preview-cancel")).to_have_text("3")
    expect(form.get_by_test_id("preview-hold")).to_have_text("2")
    form.get_by_test_id("dependents-cancel").check()
    form.get_by_label("Reason").fill("export no longer wanted")
    form.get_by_role("button", name="Cancel").click()
    expect(page.locator(".flash-ok")).to_contain_text("3 waiting dependent(s) cancelled")
    assert {n: job_row(clean_db, i)["status"] for n, i in flow.items()} == dict.fromkeys(
        flow, "cancelled")
