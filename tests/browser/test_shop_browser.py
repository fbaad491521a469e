"""The example shop (examples/shop) in Chromium: orders, their jobs, an incident with the
CRM, and its repair from the console mounted at /ops/jobs behind the shop's own login.

The shop, its fake providers and the mounted console run in a live server on the test
database; a real `jobwarden worker --app shop.jobs` runs the jobs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import pytest
from playwright.sync_api import expect
from werkzeug.serving import make_server

from tests.browser.conftest import ROOT, checked_page, stop_worker
from tests.helpers import scalar, wait_for

pytestmark = pytest.mark.browser

SHOP = ROOT / "examples" / "shop"
PASSWORD = "staff password 1"
SHOP_TYPES = ["send_confirmation", "charge_card", "sync_crm"]


@pytest.fixture
def shop_url(shop_package, database_url, clean_db, tmp_path):
    """The shop on a free port, its tables fresh, staff olga (operator), and a worker."""
    from shop import create_app
    from shop.admin import add_staff
    from shop.models import db

    app = create_app({"DATABASE_URL": database_url, "SECRET_KEY": "shop-browser-tests",
                      "SHOP_CRM_FLAKINESS": 0.0})
    with app.app_context():
        db.drop_all()
        db.create_all()
        add_staff("olga", PASSWORD, console_role="operator")
        db.session.commit()
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.port}"
    # The worker's log goes to a file the test prints when it fails (a job that never
    # ran is otherwise a silent timeout on the order page).
    log = open(tmp_path / "shop-worker.log", "w+")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [sys.executable, "-m", "jobwarden.worker.cli", "worker", "--app", "shop.jobs",
         "--concurrency", "3", "--grace", "5", "--poll-interval", "0.5"],
        cwd=SHOP, stdout=subprocess.DEVNULL, stderr=log,
        env={**os.environ, "DATABASE_URL": database_url, "SHOP_PROVIDERS_URL": url + "/fake",
             "PYTHONPATH": os.pathsep.join([str(SHOP), str(ROOT)])})
    try:
        # As in a deploy, the worker has published its types before the shop relies on
        # them (the shop's own three; the worker publishes its built-in ones too).
        wait_for(lambda: scalar(database_url, "SELECT count(*) FROM job_types "
                                "WHERE type = ANY(%s)", [SHOP_TYPES]) == 3,
                 message="the shop's worker to publish its job types")
        yield url
    finally:
        # Also when the wait above fails: a worker left running would go on claiming
        # the jobs of every later test on this database.
        stop_worker(worker)
        log.seek(0)
        print("the shop's worker said:\n" + log.read()[-20000:])  # shown on a failure
        log.close()
        server.shutdown()
        with app.app_context():
            db.session.remove()
            db.drop_all()
            db.engine.dispose()
        app.extensions["jobwarden_db"].dispose()


@pytest.fixture
def shop_page(browser, shop_url):
    with checked_page(browser, shop_url) as page:
        yield page


def place_order(page, email: str) -> int:
    page.goto("/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Item").select_option("teapot")
    page.get_by_role("button", name="Place order").click()
    expect(page).to_have_url(re.compile(r"/orders/\d+$"))
    return int(page.get_by_test_id("order-id").inner_text())


def job_status(url: str, order_id: int, job: str) -> str | None:
    return scalar(url, "SELECT status FROM background_jobs WHERE idempotency_key = %s",
                  [f"shop:order:{order_id}:{job}"])


def test_an_order_a_crm_outage_and_its_repair_from_the_mounted_console(shop_page, clean_db):
    page = shop_page
    first = place_order(page, "ann@example.com")
    # The order page reloads itself until the three effects are there.
    expect(page.get_by_test_id("order-done")).to_be_visible(timeout=20_000)
    assert [job_status(clean_db, first, j) for j in ("confirmation", "charge", "crm")] == [
        "completed"] * 3

    page.goto("/ops/jobs/failed")  # the console sends strangers to the shop's login
    expect(page).to_have_url(re.compile(r"/admin/login\?next=/ops/jobs/failed"))
    page.get_by_label("User name").fill("olga")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/ops/jobs/failed$"))
    expect(page.get_by_test_id("current-user")).to_have_text("olga")
    assert page.locator("link[rel=stylesheet]").get_attribute("href").startswith(
        "/ops/jobs/static/")
    with page.expect_response(lambda r: r.request.header_value("hx-request") == "true",
                              timeout=15_000) as polled:
        page.goto("/ops/jobs/")  # the overview's panels poll with htmx, under the prefix
    assert re.search(r"/ops/jobs/_overview/\w+(\?|$)", polled.value.url), polled.value.url
    assert polled.value.status == 200

    page.goto("/admin/")
    page.get_by_role("button", name="Break the CRM").click()
    expect(page.get_by_test_id("crm-state")).to_have_text("broken")
    second = place_order(page, "bob@example.com")
    # Leave the order page: its 1 s meta refresh can fire as the next goto starts and win,
    # taking the browser back to the order (seen once in CI: /failed, then /orders/2).
    page.goto("/admin/")
    wait_for(lambda: job_status(clean_db, second, "crm") == "failed", timeout=30,
             message="the CRM job to use its attempts and fail")

    page.goto("/ops/jobs/failed")
    page.get_by_role("link", name="CRM_UNAVAILABLE").click()
    expect(page.get_by_test_id("preview-count")).to_have_text("1")

    page.goto("/admin/")
    page.get_by_role("button", name="Fix the CRM").click()
    expect(page.get_by_test_id("crm-state")).to_have_text("working")

    page.goto("/ops/jobs/failed")
    page.get_by_role("link", name="CRM_UNAVAILABLE").click()
    page.get_by_role("button", name="Retry 1 job(s)…").click()  # the server-held review
    form = page.locator("form[data-action=bulk-retry]")
    form.get_by_label("Reason").fill("CRM back after maintenance")
    form.get_by_role("button", name="Retry 1 job(s)").click()
    expect(page.get_by_test_id("flash-ok")).to_be_visible()

    page.goto(f"/orders/{second}")
    expect(page.get_by_test_id("order-done")).to_be_visible(timeout=20_000)
    assert job_status(clean_db, second, "crm") == "completed"
    page.goto("/ops/jobs/audit")
    audit = page.get_by_test_id("audit-log")
    expect(audit).to_contain_text("olga")
    expect(audit).to_contain_text("CRM back after maintenance")
    assert scalar(clean_db, "SELECT actor FROM job_audit") == "host:olga"

    # The console's top bar leads back to the shop, and signs out through the shop's login.
    page.get_by_test_id("host-home").click()
    expect(page).to_have_url(re.compile(r"/admin/$"))
    page.goto("/ops/jobs/")
    page.get_by_test_id("sign-out").click()
    page.goto("/ops/jobs/failed")
    expect(page).to_have_url(re.compile(r"/admin/login\?next=/ops/jobs/failed"))
