"""Bulk actions at any size: chunks of one transaction each, a canary first, progress kept
in the database across a console restart, and jobs that move meanwhile left alone."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

import psycopg
import pytest

from jobwarden.console import create_app
from jobwarden.worker.ops.operations import retry_job
from jobwarden.worker.store.db import downgrade, migrate
from tests.console_support import PASSWORD, csrf_token, login
from tests.helpers import first_line, scalar, start_process, stop_process, wait_for

CHUNK = 1000  # the console's BULK_CHUNK_SIZE default
SELECTION = re.compile(r"/bulk/([0-9a-f-]{36})")

# `n` failed send_email jobs of group AUTH_FAILED, failed over the last n seconds (the
# newest first by id), and `others` failed jobs of another code that nothing may touch.
SEED = """
INSERT INTO background_jobs (queue, type, payload, status, attempts, max_attempts,
                             failed_at, last_error_code, last_error)
SELECT 'email', 'send_email', jsonb_build_object('n', g), 'failed', 3, 3,
       now() - make_interval(secs => %(n)s - g), 'AUTH_FAILED', 'SMTP 535'
FROM generate_series(1, %(n)s) g;
INSERT INTO background_jobs (queue, type, payload, status, attempts, max_attempts,
                             failed_at, last_error_code, last_error)
SELECT 'billing', 'charge', '{}', 'failed', 3, 3, now(), 'CARD_DECLINED', 'declined'
FROM generate_series(1, %(others)s) g;
"""


def seed(url: str, n: int, others: int = 10) -> list[int]:
    """The group's job ids, newest first (the order a bulk action takes them)."""
    with psycopg.connect(url) as conn:
        for statement in SEED.split(";")[:2]:
            conn.execute(statement, {"n": n, "others": others})
        return [r[0] for r in conn.execute(
            "SELECT id FROM background_jobs WHERE last_error_code = 'AUTH_FAILED' "
            "ORDER BY id DESC")]


def statuses(url: str, code: str = "AUTH_FAILED") -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM background_jobs "
                                 "WHERE last_error_code = %s GROUP BY status", [code]))


def pending_ids(url: str) -> set[int]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT id FROM background_jobs WHERE status = 'pending'")}


def audit_by_job(url: str, bulk_id: str) -> dict[int, int]:
    """How many audit rows of this bulk action each job has (its continue, stop and start
    are rows of no job)."""
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT job_id, count(*) FROM job_audit WHERE bulk_id = %s "
                                 "AND job_id IS NOT NULL GROUP BY job_id", [bulk_id]))


def console_backends(url: str, waiting: bool = False) -> set[int]:
    """The backend pids of consoles' connections to this test's database (those waiting
    for a row lock). A console of an earlier test of the session may keep idle ones."""
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'jobwarden-console'"
            + (" AND wait_event_type = 'Lock'" if waiting else ""))}


def select_group(client, post_form) -> str:
    response = post_form(client, "/bulk/select", {
        "action": "retry", "all_matching": "1", "status": "failed",
        "error_code": "AUTH_FAILED", "next": "/failed/group?code=AUTH_FAILED"})
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    return SELECTION.search(response.headers["Location"]).group(1)


def post(client, url: str, data: dict | None = None, htmx: bool = False):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(url, data={**(data or {}), "csrf_token": csrf_token(client, "/jobs")},
                       headers=headers)


def drive(client, sel: str, limit: int = 100) -> int:
    """POST the next chunk until none is left (as the page's htmx does); how many posts."""
    for posts in range(1, limit + 1):
        html = post(client, f"/bulk/{sel}/step", htmx=True).get_data(as_text=True)
        if 'hx-post="' not in html:  # the panel stopped asking for chunks
            return posts
    raise AssertionError(f"still asking for chunks after {limit} posts")


def test_a_25000_job_group_is_retried_with_a_canary_of_100_first(
        operator, post_form, clean_db):
    group = seed(clean_db, 25_000)
    sel = select_group(operator, post_form)
    review = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    assert 'data-testid="selected-count">25000<' in review
    assert 'data-testid="start-canary"' in review

    response = post(operator, f"/bulk/{sel}", {"reason": "token rotated", "request_id": "c1",
                                               "mode": "canary", "canary": "100"})
    assert response.status_code == 303
    # Exactly the canary (the 100 newest of the group) changed, nothing else.
    assert pending_ids(clean_db) == set(group[:100])
    assert statuses(clean_db) == {"pending": 100, "failed": 24_900}
    assert statuses(clean_db, "CARD_DECLINED") == {"failed": 10}
    page = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    assert 'data-state="canary"' in page and 'data-testid="bulk-continue"' in page
    assert 'data-testid="canary-pending">100<' in page
    assert 'data-testid="bulk-done">100<' in page

    # Asking for more chunks does nothing until the operator continues.
    post(operator, f"/bulk/{sel}/step")
    assert statuses(clean_db) == {"pending": 100, "failed": 24_900}

    # Meanwhile the canary's jobs end: their outcome is counted from the table.
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now() "
                     "WHERE id = ANY(%s)", [group[:90]])
        conn.execute("UPDATE background_jobs SET status = 'failed', failed_at = now() "
                     "WHERE id = ANY(%s)", [group[90:95]])
    fragment = operator.get(f"/bulk/{sel}/_progress").get_data(as_text=True)
    assert 'data-testid="canary-completed">90<' in fragment
    assert 'data-testid="canary-failed">5<' in fragment
    assert 'data-testid="canary-pending">5<' in fragment

    # Five failed again: the canary failed, and only an explicit tick goes on past it
    # (tests/integration/test_bulk_canary_steer.py).
    post(operator, f"/bulk/{sel}/continue")
    assert statuses(clean_db) == {"pending": 5, "completed": 90, "failed": 24_905}
    assert post(operator, f"/bulk/{sel}/continue", {"despite_failed_canary": "1"}
                ).status_code == 303
    posts = drive(operator, sel)
    # continue ran one chunk, the rest ran one per post: 24,900 jobs in chunks of 1,000
    assert posts == 24  # 24,900 jobs are 25 chunks: one with continue, then one a post
    # The canary's five failed-again jobs are not the bulk's to retry a second time.
    assert statuses(clean_db) == {"pending": 24_900 + 5, "completed": 90, "failed": 5}
    assert statuses(clean_db, "CARD_DECLINED") == {"failed": 10}
    audited = audit_by_job(clean_db, sel)
    assert set(audited) == set(group) and set(audited.values()) == {1}
    with psycopg.connect(clean_db) as conn:
        chunks = conn.execute("SELECT first_ord, last_ord, changed FROM console_bulk_steps "
                              "WHERE selection_id = %s ORDER BY first_ord", [sel]).fetchall()
        request_ids = conn.execute("SELECT count(DISTINCT request_id) FROM job_audit "
                                   "WHERE bulk_id = %s", [sel]).fetchone()[0]
        state = conn.execute("SELECT state, next_ord, changed, left_alone "
                             "FROM console_selections WHERE id = %s", [sel]).fetchone()
    assert chunks[0] == (0, 100, 100) and chunks[1] == (100, 1100, 1000)
    assert chunks[-1] == (24_100, 25_000, 900) and len(chunks) == 26
    assert request_ids == 26  # one per chunk: the form's id and the chunk's first job
    assert state == ("done", 25_000, 25_000, 0)
    done = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    assert 'data-state="done"' in done and 'hx-post="' not in done


def test_a_stopped_canary_touches_nothing_more(operator, post_form, clean_db):
    group = seed(clean_db, 3000)
    sel = select_group(operator, post_form)
    post(operator, f"/bulk/{sel}", {"reason": "try 5%", "request_id": "s1", "mode": "canary",
                                    "canary": "5%"})
    assert pending_ids(clean_db) == set(group[:150])
    # The audit log lists it while it is under way, with a link back to it.
    audit = operator.get("/audit").get_data(as_text=True)
    assert f'data-bulk-id="{sel}"' in audit and f'href="/bulk/{sel}"' in audit
    assert "150 of 3000 dealt with, canary of 150" in audit
    assert post(operator, f"/bulk/{sel}/stop", {"reason": "enough", "request_id": "t1"}
                ).status_code == 303
    assert 'data-testid="bulk-unfinished"' not in operator.get("/audit").get_data(as_text=True)
    post(operator, f"/bulk/{sel}/continue")
    post(operator, f"/bulk/{sel}/step")
    assert statuses(clean_db) == {"pending": 150, "failed": 2850}
    page = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    assert 'data-state="stopped"' in page and "the other 2850 job(s) were not touched" in page


@pytest.mark.parametrize("canary, problem", [
    ("abc", "Give the canary as a number of jobs"), ("0", "A canary is at least 1"),
    ("100%", "Give the canary as a number of jobs"), ("3000", "fewer than the 3,000"),
    ("-5", "A canary is at least 1"), ("nan%", "Give the canary as a number of jobs"),
])
def test_a_bad_canary_is_refused_and_changes_nothing(
        operator, post_form, clean_db, canary, problem):
    seed(clean_db, 3000)
    sel = select_group(operator, post_form)
    page = operator.post(f"/bulk/{sel}", data={
        "reason": "r", "request_id": "b1", "mode": "canary", "canary": canary,
        "csrf_token": csrf_token(operator, "/jobs")}, follow_redirects=True)
    assert problem in page.get_data(as_text=True)
    assert statuses(clean_db) == {"failed": 3000}
    assert scalar(clean_db, "SELECT state FROM console_selections") == "reviewed"


def test_a_job_that_moves_during_its_chunk_is_left_alone_and_reported(
        operator, post_form, clean_db):
    group = seed(clean_db, 2500)
    sel = select_group(operator, post_form)
    post(operator, f"/bulk/{sel}", {"reason": "all", "request_id": "m1", "mode": "all"})
    assert len(pending_ids(clean_db)) == CHUNK  # the first chunk ran with the start
    # Another operator retries a job of the second chunk before it runs...
    earlier = group[CHUNK + 7]
    with psycopg.connect(clean_db) as conn:
        retry_job(conn, earlier, actor="console:ada", role="admin", reason="mine")
    # ...and a worker holds another one while the chunk runs: it completes it meanwhile.
    racing = group[CHUNK + 500]
    holder = psycopg.connect(clean_db)
    holder.execute("UPDATE background_jobs SET status = 'completed', completed_at = now(), "
                   "failed_at = NULL WHERE id = %s", [racing])
    step = threading.Thread(target=post, args=(operator, f"/bulk/{sel}/step"))
    step.start()
    wait_for(lambda: console_backends(clean_db, waiting=True),
             message="the chunk to wait for the job's row lock")
    holder.commit()
    holder.close()
    step.join(timeout=30)
    assert not step.is_alive()
    with psycopg.connect(clean_db) as conn:
        chunk = conn.execute("SELECT changed, left_alone FROM console_bulk_steps "
                             "WHERE selection_id = %s AND first_ord = %s", [sel, CHUNK]).fetchone()
    assert chunk == (CHUNK - 2, [earlier, racing])
    assert scalar(clean_db, "SELECT status FROM background_jobs WHERE id = %s",
                  [racing]) == "completed"
    audited = audit_by_job(clean_db, sel)
    assert earlier not in audited and racing not in audited
    page = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    assert 'data-testid="bulk-left-alone">2<' in page
    left = re.search(r'data-testid="left-alone">(.*?)</p>', page, re.S).group(1)
    assert f"#{earlier}<" in left and f"#{racing}<" in left
    drive(operator, sel)
    assert scalar(clean_db, "SELECT left_alone FROM console_selections") == 2
    assert len(audit_by_job(clean_db, sel)) == 2500 - 2


def test_only_the_operator_who_selected_drives_the_action(
        app, operator, post_form, clean_db):
    seed(clean_db, 1500)
    sel = select_group(operator, post_form)
    post(operator, f"/bulk/{sel}", {"reason": "mine", "request_id": "o1", "mode": "all"})
    other = app.test_client()
    assert login(other, "ada").status_code == 303
    for path in (f"/bulk/{sel}/step", f"/bulk/{sel}/stop", f"/bulk/{sel}/continue"):
        assert post(other, path).status_code == 404
    assert statuses(clean_db) == {"pending": 1000, "failed": 500}
    # A second submission of the start form is recognised and starts nothing.
    page = operator.post(f"/bulk/{sel}", data={
        "reason": "again", "request_id": "o1", "mode": "all",
        "csrf_token": csrf_token(operator, "/jobs")}, follow_redirects=True)
    assert "Already done" in page.get_data(as_text=True)
    assert statuses(clean_db) == {"pending": 1000, "failed": 500}


# -- a console restart in the middle of a chunk ---------------------------------------------

class Session:
    """A browser's cookies and forms, over real HTTP to a console process."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=60) as response:
            return response.read().decode()

    def post(self, path: str, data: dict) -> str:
        token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"',
                          self.get("/jobs" if path != "/login" else "/login")).group(1)
        body = urllib.parse.urlencode({**data, "csrf_token": token}, doseq=True).encode()
        with self.opener.open(self.base + path, body, timeout=60) as response:
            return response.read().decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def console_process(url: str, port: int) -> subprocess.Popen:
    proc = start_process(
        [sys.executable, "-m", "jobwarden.worker.cli", "console", "--port", str(port)],
        env={**os.environ, "DATABASE_URL": url,
             "JOBWARDEN_SECRET_KEY": "restart-test-key"},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert "Jobwarden console on" in first_line(proc)
    return proc


def test_a_console_killed_in_the_middle_of_a_chunk_resumes_where_it_was(users, clean_db):
    group = seed(clean_db, 5000)
    port = free_port()
    earlier = console_backends(clean_db)
    first = console_process(clean_db, port)
    browser = Session(f"http://127.0.0.1:{port}")
    try:
        browser.post("/login", {"username": "otto", "password": PASSWORD})
        review = browser.post("/bulk/select", {"action": "retry", "all_matching": "1",
                                               "status": "failed", "error_code": "AUTH_FAILED"})
        sel = re.search(r'action="/bulk/([0-9a-f-]{36})"', review).group(1)
        browser.post(f"/bulk/{sel}", {"reason": "restart drill", "request_id": "k1",
                                      "mode": "all"})
        assert len(pending_ids(clean_db)) == CHUNK
        # The second chunk blocks on a row a worker holds; the console dies meanwhile.
        holder = psycopg.connect(clean_db)
        holder.execute("SELECT 1 FROM background_jobs WHERE id = %s FOR UPDATE",
                       [group[CHUNK + 1]])
        stuck = threading.Thread(target=lambda: _ignore_errors(
            browser.post, f"/bulk/{sel}/step", {}))
        stuck.start()
        wait_for(lambda: console_backends(clean_db, waiting=True),
                 message="the chunk to wait for the held row")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        holder.rollback()
        holder.close()
        stuck.join(timeout=60)
        # The killed console's chunk never committed: its backend rolled it back.
        wait_for(lambda: console_backends(clean_db) <= earlier,
                 message="the killed console's connections to close")
        assert len(pending_ids(clean_db)) == CHUNK
        assert scalar(clean_db, "SELECT next_ord FROM console_selections") == CHUNK
    finally:
        if first.poll() is None:
            stop_process(first, signal.SIGKILL)

    second = console_process(clean_db, port)
    try:
        page = browser.get(f"/bulk/{sel}")  # the same session, still signed in
        assert 'data-testid="bulk-done">1000<' in page
        for _ in range(10):
            if 'hx-post="' not in browser.post(f"/bulk/{sel}/step", {}):
                break
    finally:
        stop_process(second)
    audited = audit_by_job(clean_db, sel)
    assert set(audited) == set(group) and set(audited.values()) == {1}
    assert scalar(clean_db, "SELECT state FROM console_selections") == "done"
    assert scalar(clean_db, "SELECT count(*) FROM console_bulk_steps") == 5


def _ignore_errors(fn, *args):
    try:
        fn(*args)
    except (urllib.error.URLError, ConnectionError, OSError):
        pass  # the console was killed under this request


def test_selections_made_before_migration_0030_keep_their_jobs_both_ways(empty_database):
    migrate(empty_database, "0021")
    with psycopg.connect(empty_database) as conn:
        conn.execute("INSERT INTO console_selections (id, actor, action, job_ids, description, "
                     "used_at) VALUES (gen_random_uuid(), 'otto', 'retry', "
                     "(SELECT array_agg(g ORDER BY g DESC) FROM generate_series(1, 2500) g), "
                     "'old', NULL), (gen_random_uuid(), 'otto', 'skip', '{7, 3}', 'used', now())")
    migrate(empty_database)
    with psycopg.connect(empty_database) as conn:
        held = conn.execute("""
            SELECT s.description, s.state, s.jobs, s.next_ord, count(p.page),
                   array_agg(cardinality(p.job_ids) ORDER BY p.page),
                   (array_agg(p.job_ids[1] ORDER BY p.page))[1]
            FROM console_selections s JOIN console_selection_jobs p ON p.selection_id = s.id
            GROUP BY s.id ORDER BY s.description""").fetchall()
    assert held == [("old", "reviewed", 2500, 0, 3, [1000, 1000, 500], 2500),
                    ("used", "done", 2, 2, 1, [2], 7)]
    downgrade(empty_database, "0021")
    with psycopg.connect(empty_database) as conn:
        back = conn.execute("SELECT description, job_ids[1:3], cardinality(job_ids) "
                            "FROM console_selections ORDER BY description").fetchall()
    assert back == [("old", [2500, 2499, 2498], 2500), ("used", [7, 3], 2)]


def test_a_selection_too_slow_to_store_is_refused_and_stores_nothing(clean_db, users):
    seed(clean_db, 25_000)
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db,
                      "BULK_SELECT_SECONDS": 0.001})
    client = app.test_client()
    assert login(client, "otto").status_code == 303
    page = post(client, "/bulk/select", {"action": "retry", "all_matching": "1",
                                         "status": "failed"})
    assert page.status_code == 303
    assert "took longer than 0.001 s" in client.get(page.headers["Location"]).get_data(
        as_text=True)
    assert scalar(clean_db, "SELECT count(*) FROM console_selections") == 0
    assert scalar(clean_db, "SELECT count(*) FROM console_selection_jobs") == 0
    app.extensions["jobwarden_db"].dispose()
