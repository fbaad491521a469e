"""A job type's page and its duration chart: hostile names in the URL, odd ranges, the
empty state, the links that lead there, and the trigger that records handler versions.
The figures themselves: tests/figures/test_duration_figures.py."""

from __future__ import annotations

import psycopg

from jobwarden import Registry, job
from jobwarden.console.data.sample_data import insert_job
from jobwarden.worker.jobs.job_types import publish_job_types
from tests.figures.html_tree import parse

#: Names no job type can have (worker/jobs/registry.py NAME_PATTERN), as a URL carries
#: them: a slash (raw and encoded), non-ASCII letters, a right-to-left override, a NUL,
#: a newline, markup, a path climb, a space, 201 characters, a lone dot.
BAD_NAMES = ["a/b", "a%2Fb", "%C3%BCber", "caf%C3%A9", "%E2%80%AEevil", "a%00b", "a%0Ab",
             "%3Cscript%3Ealert(1)%3C%2Fscript%3E", "..", "..%2F..%2Fetc", "a%20b",
             "x" * 201, ".", "%F0%9F%92%A5"]


def test_a_name_no_type_can_have_is_a_404_for_every_role(client, login, clean_db):
    for user in ("vera", "otto"):
        login(client, user)
        for name in BAD_NAMES:
            response = client.get(f"/types/{name}")
            # A NUL anywhere in a request is refused before any view (a 400).
            expected = 400 if "%00" in name else 404
            assert response.status_code == expected, (user, name, response.status_code)
            assert b"<script>alert" not in response.data


def test_an_odd_range_shows_the_day_and_the_week_is_asked_for_by_name(viewer, clean_db):
    for asked, bucket_s in (("", 300), ("24h", 300), ("7d", 3600), ("../../etc", 300),
                            ("9999999d", 300), ("7D", 300), ("1h", 300)):
        response = viewer.get("/types/mail.send", query_string={"range": asked})
        assert response.status_code == 200, asked
        section = parse(response.get_data(as_text=True)).one("durations")
        assert section["data-bucket-s"] == str(bucket_s), asked


def test_a_type_that_never_ran_says_so_and_a_viewer_sees_no_form(viewer, clean_db):
    tree = parse(viewer.get("/types/never.ran").get_data(as_text=True))
    assert "No execution of this type ended by its handler" in tree.one("durations-empty").text()
    assert not tree.all("duration-chart")
    assert not tree.all(lambda e: e.tag == "form" and "limit-form" in e.attrs.get("class", ""))


def test_the_overview_and_a_job_lead_to_the_types_page(operator, engine, clean_db):
    with engine.begin() as conn:
        job_id = insert_job(conn, "mail.send", "completed")
    overview = parse(operator.get("/_overview/counts").get_data(as_text=True))
    (link,) = overview.one("counts-by-type").all("type-page")
    assert link["href"].endswith("/types/mail.send")
    detail = parse(operator.get(f"/jobs/{job_id}").get_data(as_text=True))
    assert detail.one(lambda e: e.tag == "h1").one(lambda e: e.tag == "a")["href"] \
        .endswith("/types/mail.send")
    assert operator.get("/types/mail.send").status_code == 200


def handler(name: str, version: int, registry: Registry):
    return job(name, queue="q", version=version, registry=registry)(lambda ctx, p: None)


def versions(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT type, version, first_by, first_at FROM job_type_versions "
                            "ORDER BY type, version").fetchall()


def test_a_version_is_recorded_once_when_a_worker_first_publishes_it(clean_db):
    old, new = Registry(), Registry()
    handler("mail.send", 1, old)
    handler("mail.send", 2, new)
    with psycopg.connect(clean_db) as conn:
        publish_job_types(conn, list(old), published_by="w1")
        conn.commit()
        (first,) = versions(clean_db)
        assert first[:3] == ("mail.send", 1, "w1")
        # Another worker of the same version (a restart, a second process): nothing new.
        publish_job_types(conn, list(old), published_by="w2")
        conn.commit()
        assert versions(clean_db) == [first]
        publish_job_types(conn, list(new), published_by="w3")
        conn.commit()
        # An old worker restarting mid-deploy republishes version 1: job_types keeps 2
        # and no version is recorded again.
        publish_job_types(conn, list(old), published_by="w4")
        conn.commit()
        assert [v[:3] for v in versions(clean_db)] == [("mail.send", 1, "w1"),
                                                        ("mail.send", 2, "w3")]
        assert versions(clean_db)[0] == first
        version = conn.execute("SELECT version FROM job_types WHERE type = 'mail.send'")
        assert version.fetchone()[0] == 2
