"""Every timestamp on every page has one presentation: the time with its zone, its
relative age, and the instant machine-readable in <time datetime>."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import psycopg
import pytest

from jobwarden import Registry, job
from jobwarden.console.data import sample_data
from jobwarden.worker.duties.scheduler import publish
from jobwarden.worker.jobs.job_types import publish_job_types
from tests.console_support import login

#: What the `when` filter renders.
WHEN = re.compile(r'<time datetime="(\d{4}-\d\d-\d\dT[^"]+)">'
                  r'(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ([A-Z][A-Za-z+\-0-9]*)</time> '
                  r'<span class="note">(?:\S+(?: \S+)? ago|in \S+(?: \S+)?)</span>')
#: A timestamp shown any other way (a datetime-local input's value has a "T").
BARE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d")


@pytest.fixture
def admin_pages(client, post_form, engine, clean_db):
    """Every page that shows a timestamp, with something on it: an operator retry (audit,
    manual retries), a held bulk selection, a schedule, a user who signed in."""
    with engine.begin() as conn:
        ids = sample_data.seed_console_scenario(conn)
    reg = Registry()
    job("nightly_report", schedule="0 3 * * *", schedule_tz="Europe/Berlin",
        registry=reg)(lambda c, p: None)
    with psycopg.connect(clean_db) as conn:
        publish_job_types(conn, list(reg), published_by="w1")
        publish(conn, reg, "w1", now=datetime.now(UTC))
    assert login(client, "ada").status_code == 303
    retried = ids["auth_failed"][0]
    assert post_form(client, f"/jobs/{retried}/retry",
                     {"reason": "creds rotated", "request_id": "t-1"}).status_code == 303
    review = post_form(client, "/bulk/select", {"action": "retry",
                                                "job_id": [str(i) for i in ids["auth_failed"]]})
    return client, ["/jobs", "/failed", "/failed/group?code=AUTH_FAILED", f"/jobs/{retried}",
                    f"/jobs/{ids['running']}", f"/jobs/{ids['unknown']}", "/review",
                    "/workers", "/schedules", "/audit", "/users", review.headers["Location"]]


def test_every_timestamp_shows_its_zone_and_age_in_a_time_element(admin_pages):
    client, paths = admin_pages
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, path
        html = response.get_data(as_text=True)
        shown = WHEN.findall(html)
        assert shown, f"{path} shows no timestamp"
        for instant, text, zone in shown:
            at = datetime.fromisoformat(instant)
            assert at.utcoffset().total_seconds() == 0, (path, instant)
            if zone == "UTC":
                assert text == at.strftime("%Y-%m-%d %H:%M:%S"), (path, instant, text)
        rest = BARE.findall(WHEN.sub("", html))
        assert not rest, f"{path} shows a timestamp without its zone and age: {rest}"


def test_a_schedule_shows_its_own_zone(admin_pages):
    client, _ = admin_pages
    html = client.get("/schedules").get_data(as_text=True)
    assert {zone for _, _, zone in WHEN.findall(html)} <= {"CET", "CEST"}
