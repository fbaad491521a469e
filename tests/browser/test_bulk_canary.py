"""A 3,000-job failed group retried with a canary of 100 first, in the browser: the canary
runs on a real worker and its outcome shows on the page; only then does one click retry
the rest, chunk after chunk (three of at most 1,000), with the progress on the page and
every job audited once. tests/integration/test_bulk_chunks.py holds the chunks of a
25,000-job group."""

from __future__ import annotations

import psycopg
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import stop_worker
from tests.helpers import scalar

pytestmark = pytest.mark.browser

GROUP = 3_000
CANARY = 100

SEED = f"""
INSERT INTO background_jobs (queue, type, payload, status, attempts, max_attempts,
                             failed_at, last_error_code, last_error)
SELECT 'browser', 'browser_task', jsonb_build_object('n', g), 'failed', 3, 3,
       now() - make_interval(secs => {GROUP} - g), 'AUTH_FAILED', 'token expired'
FROM generate_series(1, {GROUP}) g
"""


def by_status(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM background_jobs GROUP BY 1"))


def test_a_group_is_retried_with_a_canary_first_then_the_rest_in_one_click(
        page, sign_in, start_worker, engine, clean_db):
    with engine.begin() as conn:
        conn.exec_driver_sql(SEED)
    sign_in("otto")
    page.goto("/failed/group?code=AUTH_FAILED")
    page.get_by_role("button", name=f"Retry {GROUP} job(s)…").click()
    expect(page.get_by_test_id("selected-count")).to_have_text(str(GROUP))
    page.get_by_label("Reason").fill("CRM token renewed")
    expect(page.get_by_test_id("canary-size")).to_have_value(str(CANARY))
    page.get_by_test_id("start-canary").click()

    expect(page.get_by_test_id("bulk-state")).to_contain_text("The canary is done")
    expect(page.get_by_test_id("canary-pending")).to_have_text(str(CANARY))
    assert by_status(clean_db) == {"pending": CANARY, "failed": GROUP - CANARY}

    # A real worker runs the canary; the page counts how its jobs end, from the tables.
    worker = start_worker()
    expect(page.get_by_test_id("canary-completed")).to_have_text(str(CANARY), timeout=60_000)
    stop_worker(worker)
    assert by_status(clean_db) == {"completed": CANARY, "failed": GROUP - CANARY}

    page.get_by_test_id("bulk-continue").click()
    expect(page.get_by_test_id("bulk-state")).to_contain_text("Done", timeout=120_000)
    expect(page.get_by_test_id("bulk-done")).to_have_text(str(GROUP))
    expect(page.get_by_test_id("bulk-changed")).to_have_text(str(GROUP))
    expect(page.get_by_test_id("bulk-left-alone")).to_have_text("0")
    assert by_status(clean_db) == {"completed": CANARY, "pending": GROUP - CANARY}
    assert scalar(clean_db, "SELECT count(DISTINCT job_id) FILTER (WHERE bulk_id IS NOT NULL) "
                            "= count(job_id) FROM job_audit") is True
    assert scalar(clean_db, "SELECT details->>'canary_failed' FROM job_audit "
                            "WHERE action = 'continue_bulk'") == "false"
    assert scalar(clean_db, "SELECT count(job_id) FROM job_audit WHERE reason = "
                            "'CRM token renewed'") == GROUP
    page.get_by_role("link", name="Audit log of this bulk action").click()
    expect(page.get_by_test_id("bulk-count")).to_have_text(str(GROUP))


def test_a_reason_typed_to_stop_survives_the_panels_refresh_and_is_audited(
        page, sign_in, engine, clean_db):
    with engine.begin() as conn:
        conn.exec_driver_sql(SEED.replace(str(GROUP), "300"))
    sign_in("otto")
    page.goto("/failed/group?code=AUTH_FAILED")
    page.get_by_role("button", name="Retry 300 job(s)…").click()
    page.get_by_label("Reason").fill("CRM token renewed")
    page.get_by_test_id("canary-size").fill("10")
    page.get_by_test_id("start-canary").click()
    expect(page.get_by_test_id("bulk-state")).to_contain_text("The canary is done")
    page.get_by_test_id("bulk-stop-reason").fill("canary looks wrong")
    # The progress panel refreshes itself while the operator decides: the typing stays.
    with page.expect_response(lambda r: r.url.endswith("/_progress")):
        pass
    expect(page.get_by_test_id("bulk-stop-reason")).to_have_value("canary looks wrong")
    page.get_by_test_id("bulk-stop").click()
    expect(page.get_by_test_id("bulk-state")).to_contain_text("Stopped")
    assert scalar(clean_db, "SELECT reason FROM job_audit WHERE action = 'stop_bulk'") == \
        "canary looks wrong"
    assert by_status(clean_db) == {"pending": 10, "failed": 290}
