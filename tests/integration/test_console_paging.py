"""Every paged list walks from the newest page to the oldest and back, keeping its
filters, showing each row exactly once (page size 3, so a few rows make many pages)."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import text

from jobwarden.console.data.sample_data import insert_job

PAGE = 3
ROWS = 8  # three pages: 3 + 3 + 2
_LINK = re.compile(r'<a href="([^"]+)"[^>]*>([^<]*)</a>')


@pytest.fixture
def small_pages(app):
    app.extensions["jobwarden_console"].settings["PAGE_SIZE"] = PAGE
    return app


def link(body: str, label: str) -> str | None:
    for href, text_ in _LINK.findall(body):
        if label in html.unescape(text_):
            return html.unescape(href)
    return None


def walk(client, url: str, row_ids, label: str = "Older") -> tuple[list[int], list[str]]:
    """Follow `label` links from `url`; every id the pages show, and the URLs visited."""
    seen, visited = [], []
    while url:
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.get_data(as_text=True)
        seen += row_ids(body)
        visited.append(url)
        url = link(body, label)
        assert len(visited) <= ROWS, "paging never ends"
    return seen, visited


def job_ids(body: str) -> list[int]:
    return [int(n) for n in re.findall(r'href="/jobs/(\d+)"', body)]


def seed_jobs(engine, status="failed", n=ROWS, **fields) -> list[int]:
    with engine.begin() as conn:
        ids = [insert_job(conn, "send_email", status, **fields) for _ in range(n)]
        insert_job(conn, "other_type", status, **fields)  # filtered out
    return sorted(ids, reverse=True)


def test_jobs_list_pages_older_and_newer_keeping_filters(small_pages, viewer, engine):
    ids = seed_jobs(engine, "pending")
    seen, visited = walk(viewer, "/jobs?type=send_email", job_ids)
    assert seen == ids
    assert all("type=send_email" in url for url in visited)
    back, _ = walk(viewer, visited[-1], job_ids, label="Newer")
    assert sorted(back, reverse=True) == ids


def test_failed_group_pages_older_and_newer(small_pages, viewer, engine):
    ids = seed_jobs(engine, "failed", error_code="PROVIDER_5XX")
    url = "/failed/group?code=PROVIDER_5XX&type=send_email"
    seen, visited = walk(viewer, url, job_ids)
    # The page also links each job of the bulk preview; count the listed rows once.
    assert sorted(set(seen), reverse=True) == ids and len(visited) == 3
    assert all("code=PROVIDER_5XX" in u and "type=send_email" in u for u in visited)
    back, _ = walk(viewer, visited[-1], job_ids, label="Newer")
    assert set(back) == set(ids)


def test_needs_review_pages_older(small_pages, viewer, engine):
    ids = seed_jobs(engine, "unknown")
    seen, visited = walk(viewer, "/review", job_ids)
    assert sorted(set(seen), reverse=True) == sorted(set(ids) | {max(ids) + 1}, reverse=True)
    assert len(visited) == 3


def test_audit_log_pages_older_keeping_filters(small_pages, viewer, engine):
    with engine.begin() as conn:
        for i in range(ROWS):
            conn.execute(text("INSERT INTO job_audit (actor, role, action, reason) "
                              "VALUES ('otto', 'operator', 'retry', :reason)"),
                         {"reason": f"reason number {i}"})
        conn.execute(text("INSERT INTO job_audit (actor, role, action, reason) "
                          "VALUES ('ada', 'admin', 'retry', 'someone else')"))
    seen, visited = walk(viewer, "/audit?actor=otto",
                         lambda body: re.findall(r"reason number (\d+)", body))
    assert seen == [str(i) for i in reversed(range(ROWS))]
    assert all("actor=otto" in u for u in visited) and len(visited) == 3


@pytest.mark.parametrize("path", ["/jobs?", "/failed/group?code=NETWORK_TIMEOUT&",
                                  "/review?", "/audit?"])
def test_a_chosen_page_size_is_kept_from_page_to_page(small_pages, viewer, engine, path):
    with engine.begin() as conn:
        for status in ("failed", "unknown"):
            for _ in range(5):
                insert_job(conn, "send_email", status)
        for _ in range(5):
            conn.execute(text("INSERT INTO job_audit (actor, role, action, reason) "
                              "VALUES ('otto', 'operator', 'retry', 'r')"))
    _, visited = walk(viewer, path + "limit=2", lambda body: [])
    assert len(visited) >= 3 and all("limit=2" in u for u in visited), visited
