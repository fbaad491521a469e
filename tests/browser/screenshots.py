"""Screenshots of every console page, at 1440 px and on a 390 px phone, for the README
(run by hand, not a test).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \
        .venv/bin/python -m tests.browser.screenshots

Seeds a throwaway database with jobwarden.console.data.sample_data's incident scenario and an
outage still retrying, serves the console, signs in as an admin, retries one job (so the
audit log has an entry), opens a bulk review, and saves PNGs under docs/screenshots/:
`<page>.png` at 1440 px wide and `<page>-phone.png` at 390 px; a few pages (DARK) also
as `<page>-dark.png`, in the dark colour scheme.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from playwright.sync_api import sync_playwright
from sqlalchemy import create_engine

from jobwarden.console.cli.accounts import user_add
from jobwarden.console.cli.server import make_server
from jobwarden.console.data import sample_data
from jobwarden.worker.store import db as dbmod

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
PAGES = [
    ("overview", "/"),
    ("failed-groups", "/failed"),
    ("failed-group", "/failed/group?code=AUTH_FAILED"),
    ("failed-group-retrying", "/failed/group?code=CRM_UNAVAILABLE&type=sync_crm"),
    ("jobs", "/jobs?queue=reports"),
    ("queues", "/queues"),
    ("schedules", "/schedules"),
    ("job-detail", "/jobs/{running}"),
    ("job-detail-failed", "/jobs/{failed}"),
    ("needs-review", "/review"),
    ("workers", "/workers"),
    ("sla", "/sla"),
    ("audit", "/audit"),
    ("audit-actions", "/audit/actions"),
    ("job-type", "/types/export_report"),
    ("bulk-review", "{bulk_review}"),
    ("search", "/search?q=orderId%3D7100"),
    ("users", "/users"),
    ("login", "/login"),
]
WIDTHS = {"": 1440, "-phone": 390}
#: Pages also shot in the dark colour scheme (prefers-color-scheme), at 1440: <page>-dark.png.
DARK = ("overview", "failed-groups", "job-detail-failed", "job-type")


def main() -> int:
    server_url = dbmod.normalize_url(os.environ.get("DATABASE_URL") or dbmod.database_url())
    name = f"jobwarden_screens_{uuid.uuid4().hex[:6]}"
    parts = urlsplit(server_url)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))  # ?host= too
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        dbmod.migrate(url)
        engine = create_engine(dbmod.sqlalchemy_url(url))
        with engine.begin() as conn:
            ids = sample_data.seed_console_scenario(conn)
            # A CRM outage still retrying: "Retrying now" on /failed, the storm alert.
            sample_data.seed_retry_storm(conn)
            # A day of export_report's durations, slower since version 2 six hours ago.
            sample_data.seed_duration_history(conn)
        engine.dispose()
        user_add("otto", "admin", "screenshots-only", database_url=url)
        server = make_server("127.0.0.1", 0, config={
            "DATABASE_URL": url, "SECRET_KEY": "screens",
            "SLA_TARGETS": {"export_report": 30.0, "send_email": 60.0, "charge_card": 10.0}})
        threading.Thread(target=server.serve_forever, daemon=True).start()
        shoot(f"http://127.0.0.1:{server.server_port}", ids)
        server.shutdown()
        server.app.extensions["jobwarden_db"].dispose()
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


def shoot(base: str, ids: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=os.environ.get("JOBWARDEN_CHROMIUM", "/usr/bin/chromium"),
            headless=True, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page(base_url=base, viewport={"width": 1440, "height": 900})
        page.goto("/login")
        page.get_by_label("User name").fill("otto")
        page.get_by_label("Password").fill("screenshots-only")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda u: "/login" not in u)
        page.goto(f"/jobs/{ids['provider_5xx'][0]}")
        form = page.locator("form[data-action=retry]")
        form.get_by_label("Reason").fill("payments provider recovered (status page)")
        form.get_by_role("button", name="Retry").click()
        page.get_by_test_id("flash-ok").wait_for()
        page.goto("/queues")
        pause = page.locator('tr[data-queue="email"] form[data-action=pause]')
        pause.get_by_label("Reason").fill("SMTP provider outage: stop hammering it")
        pause.get_by_role("button", name="Pause").click()
        page.get_by_test_id("flash-ok").wait_for()
        page.goto("/failed/group?code=AUTH_FAILED")
        page.get_by_role("button", name="Retry 6 job(s)…").click()
        page.get_by_test_id("selected-count").wait_for()
        ids = {**ids, "bulk_review": page.url.replace(base, ""),
               "failed": ids["auth_failed"][0]}
        for suffix, width in WIDTHS.items():
            page.set_viewport_size({"width": width, "height": 900 if width > 500 else 844})
            for label, path in PAGES:
                if label == "login":
                    continue
                page.goto(path.format(**ids))
                page.wait_for_load_state("networkidle")
                page.screenshot(path=str(OUT / f"{label}{suffix}.png"), full_page=True)
                print(OUT / f"{label}{suffix}.png")
        page.set_viewport_size({"width": 1440, "height": 900})
        page.emulate_media(color_scheme="dark")
        for label, path in PAGES:
            if label in DARK:
                page.goto(path.format(**ids))
                page.wait_for_load_state("networkidle")
                page.screenshot(path=str(OUT / f"{label}-dark.png"), full_page=True)
                print(OUT / f"{label}-dark.png")
        anonymous = browser.new_page(base_url=base, viewport={"width": 1440, "height": 900})
        for suffix, width in WIDTHS.items():
            anonymous.set_viewport_size({"width": width, "height": 900})
            anonymous.goto("/login")
            anonymous.screenshot(path=str(OUT / f"login{suffix}.png"), full_page=True)
        browser.close()


if __name__ == "__main__":
    sys.exit(main())
