"""A canary that fails again steers the operator to Stop, in Chromium with a real worker:
400 sync_crm jobs failed with AUTH_FAILED; the CRM's token is still expired, so the 50 of
the canary fail again on the worker. The page warns with the code (linked to its group),
Stop becomes the main button, and Continue stays refused until its box is ticked (a tick
the panel's refresh keeps); continuing anyway is audited as such, and once done the page
shows how the whole set stands, the canary beside the rest."""

from __future__ import annotations

import re

import psycopg
import pytest
from playwright.sync_api import expect

from tests.browser.browser_app import CRM_FIXED
from tests.browser.conftest import stop_worker
from tests.helpers import scalar

pytestmark = pytest.mark.browser

GROUP, CANARY = 400, 50
SEED = f"""
INSERT INTO background_jobs (queue, type, payload, status, attempts, max_attempts,
                             failed_at, last_error_code, last_error)
SELECT 'browser', 'sync_crm', jsonb_build_object('account', g), 'failed', 3, 3,
       now() - make_interval(secs => {GROUP} - g), 'AUTH_FAILED',
       'CRM answered 401: the API token expired'
FROM generate_series(1, {GROUP}) g
"""


def by_status(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM background_jobs GROUP BY 1"))


def test_a_canary_failed_again_steers_to_stop_and_continuing_is_ticked_and_audited(
        page, sign_in, engine, clean_db, start_worker, monkeypatch):
    monkeypatch.delenv(CRM_FIXED, raising=False)  # the token is not renewed
    with engine.begin() as conn:
        conn.exec_driver_sql(SEED)
    sign_in("otto")
    page.goto("/failed/group?code=AUTH_FAILED")
    page.get_by_role("button", name=f"Retry {GROUP} job(s)…").click()
    page.get_by_label("Reason").fill("token renewed?")
    page.get_by_test_id("canary-size").fill(str(CANARY))
    page.get_by_test_id("start-canary").click()
    expect(page.get_by_test_id("bulk-state")).to_contain_text("The canary is done")
    panel = page.get_by_test_id("bulk-progress")
    expect(panel).to_have_attribute("data-canary", "ok")
    # Still to run: Continue is not the main button yet.
    expect(page.get_by_test_id("bulk-continue")).not_to_have_class(re.compile("primary"))
    started = page.get_by_test_id("bulk-started").locator(".note").first.inner_text()

    worker = start_worker()
    expect(page.get_by_test_id("canary-failed")).to_have_text(str(CANARY), timeout=60_000)
    stop_worker(worker)
    assert by_status(clean_db) == {"failed": GROUP}

    # The warning, by code, linked to its group; Stop first and main, in the alarm colour.
    warning = page.get_by_test_id("canary-failed-warning")
    expect(warning).to_be_visible()
    expect(warning.get_by_test_id("canary-failed-again")).to_have_text(str(CANARY))
    code = warning.locator('tr[data-canary-code="AUTH_FAILED"]')
    expect(code.get_by_test_id("canary-code-jobs")).to_have_text(str(CANARY))
    expect(code.get_by_role("link", name="AUTH_FAILED")).to_have_attribute(
        "href", "/failed/group?code=AUTH_FAILED")
    expect(page.get_by_test_id("bulk-state")).to_contain_text("it failed: stop here")
    stop = page.get_by_test_id("bulk-stop")
    go = page.get_by_test_id("bulk-continue")
    expect(stop).to_have_class(re.compile(r"\bprimary\b.*\bdanger\b"))
    expect(stop).to_have_css("background-color", "rgb(198, 40, 40)")  # --bad
    expect(go).not_to_have_class(re.compile("primary"))
    expect(go).to_have_text(f"Continue anyway: retry the other {GROUP - CANARY}")
    # (one script, so the panel's refresh cannot swap it between the two reads)
    assert page.evaluate("""() => {
        const d = document.querySelector('[data-testid=bulk-decide]');
        const s = d.querySelector('[data-testid=bulk-stop]');
        const c = d.querySelector('[data-testid=bulk-continue]');
        return !!(s.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING);
    }""")
    # "Started … ago" has moved on with the panel's refresh.
    expect(page.get_by_test_id("bulk-started").locator(".note").first).not_to_have_text(
        started, timeout=10_000)

    # Continue without the tick: the browser keeps the form (nothing is sent).
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url)
            if r.method == "POST" and r.url.endswith("/continue") else None)
    tick = page.get_by_test_id("bulk-continue-despite")
    go.click()
    # the browser's own check holds it: the box is required and not ticked
    assert tick.evaluate("e => e.validity.valueMissing && !e.form.checkValidity()")
    assert posts == [] and scalar(clean_db, "SELECT state FROM console_selections") == \
        "canary"
    tick.check()
    # The panel refreshes (every 1 s here) and the tick stays.
    with page.expect_response(lambda r: r.url.endswith("/_progress")):
        pass
    with page.expect_response(lambda r: r.url.endswith("/_progress")):
        pass
    expect(tick).to_be_checked()
    go.click()
    expect(page.get_by_test_id("bulk-state")).to_contain_text("Done", timeout=30_000)
    assert posts and by_status(clean_db) == {"failed": CANARY, "pending": GROUP - CANARY}
    assert scalar(clean_db, "SELECT details->>'despite_failed_canary' FROM job_audit "
                            "WHERE action = 'continue_bulk'") == "true"

    # How the whole set stands: the canary's failures beside the rest still to run.
    table = page.get_by_test_id("set-outcome")
    failed = table.locator('tr[data-outcome-status="failed"][data-outcome-code="AUTH_FAILED"]')
    expect(failed.get_by_test_id("outcome-canary")).to_have_text(str(CANARY))
    expect(failed.get_by_test_id("outcome-rest")).to_have_text("0")
    pending = table.locator('tr[data-outcome-status="pending"]:not([data-outcome-code])')
    expect(pending.get_by_test_id("outcome-rest")).to_have_text(str(GROUP - CANARY))
    expect(pending.get_by_test_id("outcome-whole")).to_have_text(str(GROUP - CANARY))
    expect(page.get_by_test_id("set-not-ended")).to_contain_text(f"{GROUP - CANARY} of them")

    # The audit log says it went on despite the canary.
    page.goto("/audit?action=continue_bulk")
    expect(page.get_by_test_id("audit-despite-failed-canary")).to_have_text(
        f"despite a failed canary ({CANARY} failed again)")
