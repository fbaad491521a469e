"""The retry-storm drill: a live outage is on /failed before any job's attempts are spent,
and from the alert's link the audited retry of exactly its jobs takes 2 clicks.

Beside a million other jobs (tests/browser/test_incident_drill.py's seed, whose 400
send_email AUTH_FAILED failures are made five days old: an old group of the same code, of
another type), a real worker runs 60 `sync_crm` jobs whose CRM token expired: each
attempt fails with AUTH_FAILED and waits 5 minutes for the next (tests/browser/
browser_app.py). The test drives the clock for the later attempts (their available_at),
never waits for a backoff.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote_plus

import psycopg
import pytest
from playwright.sync_api import expect

from tests.browser.browser_app import CRM_FIXED
from tests.browser.test_incident_drill import GROUP as OLD_GROUP
from tests.browser.test_incident_drill import OTHERS, SEED
from tests.helpers import scalar, wait_for
from worker import enqueue

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
