"""The retry-storm drill: a live outage is on /failed before any job's attempts are spent,
and from the alert's link the audited retry of exactly its jobs takes 2 clicks.

Beside a million other jobs (tests/browser/test_incident_drill.py's seed, whose 400
send_email AUTH_FAILED failures are made five days old: an old group of the same code, of
another type), a real worker runs 60 `sync_crm` jobs whose CRM token expired: each
attempt fails with AUTH_FAILED and waits 5 minutes for the next (tests/browser/
browser_app.py). The test drives the clock for the later attempts (their available_at),
never waits for a backoff. At the end, search finds one account's job by its payload value.
A second test retries a 3,000-job outage of the same kind from its alert's link, with a
canary of 100 first and the rest in chunks (tests/integration/test_bulk_chunks.py holds
the chunks of 25,000).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote_plus

import psycopg
import pytest
from playwright.sync_api import expect

from jobwarden import enqueue
from tests.browser.browser_app import CRM_FIXED
from tests.browser.conftest import stop_worker
from tests.browser.test_incident_drill import GROUP as OLD_GROUP
from tests.browser.test_incident_drill import OTHERS, SEED
from tests.helpers import scalar, wait_for

pytestmark = pytest.mark.browser

OUTAGE = 60
RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "jobwarden.rules.yml"


def alert_link(alert: str, console: str, **labels: str) -> str:
    """The console_url the shipped rule gives an alert with these labels, as Prometheus
    expands it when the console's jobwarden_console_info says `console`."""
    body = RULES.read_text().split(f"- alert: {alert}\n")[1].split("- alert:")[0]
    template = re.search(r"^\s+console_url: '(.+)'$", body, re.M).group(1)
    url = re.sub(r"\{\{ with query .+? \}\}\{\{ \(index \. 0\)\.Labels\.console_url \}\}"
                 r"\{\{ end \}\}", console, template)
    url = re.sub(r"\{\{ \$labels\.(\w+) \| urlquery \}\}",
                 lambda m: quote_plus(labels[m.group(1)]), url)
    url = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], url)
    assert "{{" not in url, url
    return url


@pytest.fixture
def outage(engine, clean_db, tmp_path, monkeypatch):
    """The million others and the old group, then the outage's jobs enqueued; the worker
    started by the test reads the CRM's state from a file that does not exist yet."""
    with engine.begin() as conn:
        conn.exec_driver_sql(SEED)
        conn.exec_driver_sql("UPDATE background_jobs SET failed_at = now() - interval '5 days' "
                             "WHERE last_error_code = 'AUTH_FAILED'")
    fixed = tmp_path / "crm-token-renewed"
    monkeypatch.setenv(CRM_FIXED, str(fixed))
    with psycopg.connect(clean_db) as conn:
        ids = [enqueue(conn, "sync_crm", {"account": n}, queue="browser", max_attempts=3)
               for n in range(OUTAGE)]
        conn.commit()
    return ids, fixed


def attempts_of(url: str, ids: list[int]) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT status, attempts, count(*) FROM background_jobs "
                            "WHERE id = ANY(%s) GROUP BY 1, 2 ORDER BY 1, 2", [ids]).fetchall()


def next_attempt_now(url: str, ids: list[int]) -> None:
    """The backoff has passed (the clock driven): the waiting jobs are due."""
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE background_jobs SET available_at = now() "
                     "WHERE id = ANY(%s) AND status = 'pending'", [ids])


def test_a_retry_storm_shows_before_attempts_are_spent_and_its_alert_retries_in_2_clicks(
        page, sign_in, outage, clean_db, start_worker, live_console):
    ids, fixed = outage
    sign_in("otto")
    page.goto("/failed")
    retrying = page.locator('tr[data-retrying-code="AUTH_FAILED"][data-type="sync_crm"]')
    expect(retrying).to_have_count(0)
    start_worker()
    # The page's own refresh brings the storm in, within the first minute of it.
    expect(retrying).to_be_visible(timeout=60_000)
    expect(retrying.get_by_test_id("retrying-jobs")).to_have_text(str(OUTAGE), timeout=30_000)
    # Before any attempts are spent: every job failed once, none for good.
    assert attempts_of(clean_db, ids) == [("pending", 1, OUTAGE)]
    expect(retrying.get_by_test_id("retrying-left")).to_have_text("2")
    # The failed group of the code is the old one only, of another type; it is active
    # now, its code retrying now.
    failed = page.locator('#failed-groups tr[data-error-code="AUTH_FAILED"]')
    expect(failed.get_by_test_id("group-types")).to_have_text("send_email")
    expect(failed.get_by_test_id("group-count")).to_have_text(str(OLD_GROUP))
    expect(failed.get_by_test_id("active-now")).to_be_visible()

    # The overview's Alerts panel: the storm fires now, linking where its rule does.
    page.goto("/")
    storm = page.locator('tr[data-alert="JobwardenRetryStorm"]')
    expect(storm.get_by_test_id("alert-state")).to_have_text("FIRING")
    storm_link = alert_link("JobwardenRetryStorm", live_console, type="sync_crm",
                            error_code="AUTH_FAILED")
    expect(storm.get_by_test_id("alert-link")).to_have_attribute(
        "href", storm_link.removeprefix(live_console))
    storm.get_by_test_id("alert-link").click()
    expect(page.get_by_test_id("group-retrying").get_by_test_id("retrying-jobs")).to_have_text(
        str(OUTAGE))
    expect(page.get_by_test_id("preview-count")).to_have_text("0")

    # The attempts run out (the clock driven past each backoff): a failed group of 60.
    for attempt in (2, 3):
        next_attempt_now(clean_db, ids)
        wait_for(lambda a=attempt: attempts_of(clean_db, ids) in (
            [("pending", a, OUTAGE)], [("failed", a, OUTAGE)]), timeout=60,
            message=f"attempt {attempt} of every job")
    assert attempts_of(clean_db, ids) == [("failed", 3, OUTAGE)]

    # The failed-rate alert fires for the code and type; its console_url is the link.
    link = alert_link("JobwardenFailedRateHigh", live_console, type="sync_crm",
                      error_code="AUTH_FAILED")
    assert link == f"{live_console}/failed/group?code=AUTH_FAILED&type=sync_crm"
    page.goto("/")
    rate = page.locator('tr[data-alert="JobwardenFailedRateHigh"]')
    expect(rate.get_by_test_id("alert-state")).to_have_text("FIRING")
    expect(rate.get_by_test_id("alert-link")).to_have_attribute(
        "href", link.removeprefix(live_console))

    # The CRM's token is renewed; from the alert's link, 2 clicks to the audited retry.
    fixed.touch()
    page.goto(link)
    expect(page.get_by_test_id("preview-count")).to_have_text(str(OUTAGE))
    clicks = 0

    def click(locator):
        nonlocal clicks
        clicks += 1
        locator.click()

    click(page.get_by_role("button", name=f"Retry {OUTAGE} job(s)…"))
    expect(page.get_by_test_id("selected-count")).to_have_text(str(OUTAGE))
    page.get_by_label("Reason").fill("CRM token renewed, ticket OPS-88")
    click(page.get_by_role("button", name=f"Retry {OUTAGE} job(s)", exact=True))
    assert clicks == 2
    expect(page.get_by_test_id("flash-ok")).to_contain_text(f"Retried {OUTAGE} of {OUTAGE}")
    expect(page.get_by_test_id("bulk-actor")).to_have_text("otto")
    # Exactly the live jobs were retried, audited; the old group of the code stays failed.
    with psycopg.connect(clean_db) as conn:
        retried = {r[0] for r in conn.execute(
            "SELECT job_id FROM job_audit WHERE reason = 'CRM token renewed, ticket OPS-88'")}
    assert retried == set(ids)
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE status = 'failed' "
                            "AND last_error_code = 'AUTH_FAILED'") == OLD_GROUP
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE status = 'failed'") \
        == OLD_GROUP + OTHERS // 50
    # The worker runs them again, and now they complete.
    wait_for(lambda: attempts_of(clean_db, ids) == [("completed", 4, OUTAGE)], timeout=60,
             message="the retried jobs completed")

    # An account's job, found by its payload value among the million and the outage.
    page.goto("/search")
    page.get_by_test_id("search-box").fill("account=42")
    page.get_by_test_id("search-box").press("Enter")
    found = page.get_by_test_id("search-results").locator("tbody tr")
    expect(found).to_have_count(1)
    expect(found).to_have_attribute("data-job-id", str(ids[42]))
    expect(found.get_by_test_id("matched")).to_have_text("42")
    found.locator(f'a[href$="/jobs/{ids[42]}"]').click()
    expect(page).to_have_url(re.compile(rf"/jobs/{ids[42]}$"))


#: A canary of 100 (the review's suggestion from 1,000 jobs on), then three chunks of at
#: most 1,000 (BULK_CHUNK_SIZE).
CANARY_GROUP = 3_000
CANARY = 100


def test_a_3000_job_outage_is_retried_from_its_alert_with_a_canary_of_100_first(
        page, sign_in, engine, clean_db, tmp_path, monkeypatch, start_worker, live_console):
    """The same drill at 3,000 failed sync_crm jobs (beside the million others and the old
    group of the code): from the failed-rate alert's link, a canary of 100 runs on a real
    worker and shows how it ended before one click retries the rest; nothing else moves."""
    with engine.begin() as conn:
        conn.exec_driver_sql(SEED)
        conn.exec_driver_sql("UPDATE background_jobs SET failed_at = now() - interval '5 days' "
                             "WHERE last_error_code = 'AUTH_FAILED'")
        conn.exec_driver_sql(f"""
            INSERT INTO background_jobs (queue, type, payload, status, attempts, max_attempts,
                                         failed_at, last_error_code, last_error)
            SELECT 'browser', 'sync_crm', jsonb_build_object('account', g), 'failed', 3, 3,
                   now() - make_interval(secs => {CANARY_GROUP} - g), 'AUTH_FAILED',
                   'CRM answered 401: the API token expired'
            FROM generate_series(1, {CANARY_GROUP}) g""")
    fixed = tmp_path / "crm-token-renewed"
    monkeypatch.setenv(CRM_FIXED, str(fixed))
    others = "SELECT status, count(*) FROM background_jobs WHERE type <> 'sync_crm' GROUP BY 1"
    with psycopg.connect(clean_db) as conn:
        before = dict(conn.execute(others))

    def outage() -> dict[str, int]:
        with psycopg.connect(clean_db) as conn:
            return dict(conn.execute("SELECT status, count(*) FROM background_jobs "
                                     "WHERE type = 'sync_crm' GROUP BY 1"))

    sign_in("otto")
    page.goto(alert_link("JobwardenFailedRateHigh", live_console, type="sync_crm",
                         error_code="AUTH_FAILED"))
    expect(page.get_by_test_id("preview-count")).to_have_text(str(CANARY_GROUP))
    page.get_by_role("button", name=f"Retry {CANARY_GROUP} job(s)…").click()
    expect(page.get_by_test_id("selected-count")).to_have_text(str(CANARY_GROUP))
    page.get_by_label("Reason").fill("CRM token renewed, ticket OPS-89")
    expect(page.get_by_test_id("canary-size")).to_have_value(str(CANARY))
    page.get_by_test_id("start-canary").click()
    expect(page.get_by_test_id("bulk-state")).to_contain_text("The canary is done")
    expect(page.get_by_test_id("canary-pending")).to_have_text(str(CANARY))
    assert outage() == {"pending": CANARY, "failed": CANARY_GROUP - CANARY}

    # The token renewed, a real worker runs the canary; the page shows how it ended.
    fixed.touch()
    worker = start_worker()
    expect(page.get_by_test_id("canary-completed")).to_have_text(str(CANARY), timeout=60_000)
    stop_worker(worker)
    assert outage() == {"completed": CANARY, "failed": CANARY_GROUP - CANARY}

    page.get_by_test_id("bulk-continue").click()
    expect(page.get_by_test_id("bulk-state")).to_contain_text("Done", timeout=120_000)
    expect(page.get_by_test_id("bulk-changed")).to_have_text(str(CANARY_GROUP))
    expect(page.get_by_test_id("bulk-left-alone")).to_have_text("0")
    assert outage() == {"completed": CANARY, "pending": CANARY_GROUP - CANARY}
    # Only the outage's jobs moved, each audited once under the reason.
    with psycopg.connect(clean_db) as conn:
        assert dict(conn.execute(others)) == before
    assert scalar(clean_db, "SELECT count(DISTINCT job_id) FROM job_audit WHERE reason = "
                            "'CRM token renewed, ticket OPS-89'") == CANARY_GROUP
    assert scalar(clean_db, "SELECT count(job_id) FROM job_audit") == CANARY_GROUP
    # and the decision to go on after the canary, once: it had not failed
    assert scalar(clean_db, "SELECT details->>'canary_failed' FROM job_audit "
                            "WHERE job_id IS NULL AND action = 'continue_bulk'") == "false"
