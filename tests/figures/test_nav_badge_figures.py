"""The navigation's badges as their refresh fragment (/_nav/badges) serves them, against
independent counts over `background_jobs`: failed jobs, unknown outcomes (Needs review)
and the job types breaching their SLA now; after the tables change, the next refresh
carries the new figures, and a count fallen to 0 empties its badge's slot."""

from __future__ import annotations

import json

import psycopg
import pytest

from jobwarden.console import create_app
from tests.console_support import login
from tests.figures.conftest import rows
from tests.figures.html_tree import Element, parse

#: SLA targets of this test's console: mail.send breaches once a runnable job of it has
#: waited a minute, report.build only after an hour.
TARGETS = {"mail.send": 60.0, "report.build": 3600.0}


@pytest.fixture
def console(seeded, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "figures", "DATABASE_URL": seeded.url,
                      "SLA_TARGETS": TARGETS, "SLA_DEFAULT_SECONDS": None})
    yield app
    app.extensions["jobwarden_db"].dispose()


def real(url: str) -> dict[str, int]:
    (failed, unknown), = rows(url, "SELECT count(*) FILTER (WHERE status = 'failed'), "
                                   "count(*) FILTER (WHERE status = 'unknown') "
                                   "FROM background_jobs")
    breaching = rows(url, """
        SELECT count(DISTINCT type) FROM background_jobs
        WHERE status = 'pending' AND available_at <= now()
          AND now() - available_at > make_interval(secs => (%s::jsonb ->> type)::float8)""",
                     [json.dumps(TARGETS)])[0][0]
    return {"failed": failed, "review": unknown, "sla": breaching}


def badges(doc: Element) -> dict[str, int]:
    """{badge: count} of each slot (0 for an empty one)."""
    slots = doc.all(lambda e: e.attrs.get("id", "").startswith("nav-count-"))
    assert slots
    return {slot["id"].removeprefix("nav-count-"):
            int(slot.one(f"nav-badge-{slot['id'].removeprefix('nav-count-')}").text())
            if slot.maybe(lambda e: "nav-badge" in e.attrs.get("class", "")) else 0
            for slot in slots}


@pytest.mark.parametrize("username", ["vera", "otto"])
def test_the_badge_refresh_counts_what_the_tables_hold_now(console, seeded, username):
    client = console.test_client()
    login(client, username)
    with psycopg.connect(seeded.url) as conn:  # one mail.send job runnable for 5 minutes
        conn.execute("UPDATE background_jobs SET available_at = now() - interval '5 minutes' "
                     "WHERE id = (SELECT min(id) FROM background_jobs WHERE status = 'pending' "
                     "AND type = 'mail.send' AND available_at <= now())")
    response = client.get("/_nav/badges", headers={"HX-Request": "true"})
    assert response.status_code == 200
    fragment = parse(response.get_data(as_text=True))
    expected = real(seeded.url)
    assert badges(fragment) == expected
    assert expected["failed"] > 0 and expected["review"] > 0 and expected["sla"] == 1
    # every slot is an out-of-band swap into the slot of the same id on the page
    assert {s["hx-swap-oob"] for s in fragment.having("hx-swap-oob")} == {"innerHTML"}
    page = parse(client.get("/jobs").get_data(as_text=True))
    assert badges(page.one(lambda e: e.attrs.get("id") == "main-nav")) == expected
    poll = page.one("nav-badges-poll")
    assert poll["hx-get"] == "/_nav/badges" and poll["hx-swap"] == "none"

    # The tables change under a page left open: the next refresh has the new figures, and
    # a count fallen to 0 leaves its slot empty (the badge goes).
    with psycopg.connect(seeded.url) as conn:
        conn.execute("INSERT INTO background_jobs (queue, type, payload, status, attempts, "
                     "last_error_code, failed_at) SELECT 'email', 'mail.send', '{}', "
                     "'failed', 3, 'LATE', now() FROM generate_series(1, 7)")
        conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now() "
                     "WHERE status = 'unknown'")
        conn.execute("UPDATE background_jobs SET available_at = now() + interval '1 hour' "
                     "WHERE status = 'pending' AND type = 'mail.send'")
    # (the SLA count is reused for SLA_BADGE_SECONDS, 10 s: let it go, as 10 s would)
    console.extensions["jobwarden_sla_badge"].clear()
    fragment = parse(client.get("/_nav/badges").get_data(as_text=True))
    after = real(seeded.url)
    assert badges(fragment) == after == {"failed": expected["failed"] + 7, "review": 0,
                                         "sla": 0}


def test_the_badge_refresh_asks_a_signed_out_browser_to_sign_in(client):
    response = client.get("/_nav/badges", headers={"HX-Request": "true"})
    assert response.status_code == 401 and response.headers["HX-Redirect"].startswith("/login")
    assert client.get("/_nav/badges").status_code == 302


@pytest.mark.parametrize("method, path, status", [
    ("get", "/_nav/badges?limit=-1&status=%27%3B--&badge=users", 200),  # params: ignored
    ("post", "/_nav/badges", 405),
    ("get", "/_nav/badges/failed", 404),
])
def test_the_badge_refresh_takes_no_parameters(viewer, method, path, status):
    response = getattr(viewer, method)(path)
    assert response.status_code == status
    if status == 200:
        assert "nav-count-users" not in response.get_data(as_text=True)
