"""Live limits from the Queues page and the CLI: an operator sets and clears a queue's or
a type's limit with a reason (audited, CSRF-checked, operator at least), the page shows
who set it and when, and a running worker applies it within seconds."""

from __future__ import annotations

import os

import psycopg

from jobwarden import Registry, enqueue, job
from tests.figures.html_tree import parse
from tests.helpers import job_row, running_worker, scalar, wait_for
from tests.integration.test_cli import jobwarden


def _limit_row(html: str, target: str):
    return parse(html).one(lambda e: e.attrs.get("data-limit") == target)


def test_an_operator_sets_and_clears_a_queue_limit_from_the_queues_page(
        operator, post_form, clean_db, conn):
    enqueue(conn, "mail", {}, queue="email")
    conn.commit()
    r = post_form(operator, "/limits/set", {
        "scope": "queue", "name": "email", "max_concurrency": "3", "rate": "120/m",
        "burst": "5", "reason": "SMTP provider throttling", "request_id": "req-1"},
        token_from="/queues")
    assert r.status_code == 303
    assert scalar(clean_db, "SELECT (max_concurrency, rate, burst, set_by, reason)::text "
                            "FROM job_limit_controls WHERE scope = 'queue' AND name = 'email'"
                  ) == "(3,2,5,otto,\"SMTP provider throttling\")"
    html = operator.get("/queues").get_data(as_text=True)
    assert "is limited to at most 3 at once and 2/s (burst 5)" in html  # the flash
    row = _limit_row(html, "queue:email")
    assert row.one("limit-rate").text() == "2/s (burst 5)"
    assert row.one("limit-concurrency").text() == "3"
    assert row.one("limit-set-by").text() == "otto"
    assert "SMTP provider throttling" in row.one("limit-source").text()
    # The same form again (a double-click) acts once.
    post_form(operator, "/limits/set", {
        "scope": "queue", "name": "email", "max_concurrency": "3", "reason": "again",
        "request_id": "req-1"}, token_from="/queues")
    assert scalar(clean_db, "SELECT count(*) FROM job_audit WHERE action = 'set_limit'") == 1
    r = post_form(operator, "/limits/clear", {
        "scope": "queue", "name": "email", "reason": "provider fine", "request_id": "req-2"},
        token_from="/queues")
    assert r.status_code == 303
    assert scalar(clean_db, "SELECT count(*) FROM job_limit_controls") == 0
    audit = conn.execute("SELECT actor, role, action, reason, details->>'limit', "
                         "details->'previous'->>'max_concurrency' FROM job_audit ORDER BY id"
                         ).fetchall()
    assert audit == [("otto", "operator", "set_limit", "SMTP provider throttling",
                      "queue:email", None),
                     ("otto", "operator", "clear_limit", "provider fine", "queue:email", "3")]
    assert "No queue or job type is limited." in operator.get("/queues").get_data(as_text=True)
    subjects = [e.text() for e in parse(operator.get("/audit").get_data(as_text=True))
                .all("audit-subject")]
    assert subjects == ["limit of queue email", "limit of queue email"]


def test_a_limit_on_a_queue_nothing_names_is_refused_as_the_cli_refuses_it(
        operator, post_form, clean_db, conn):
    enqueue(conn, "mail", {}, queue="email")
    conn.commit()
    r = post_form(operator, "/limits/set", {
        "scope": "queue", "name": "emial", "rate": "5/s", "reason": "typo",
        "request_id": "t-1"}, token_from="/queues")
    assert r.status_code == 303
    assert "queue &#39;emial&#39; is unknown" in operator.get("/queues").get_data(as_text=True)
    assert scalar(clean_db, "SELECT count(*) FROM job_limit_controls") == 0
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 0
    # The queue a job names is known.
    post_form(operator, "/limits/set", {"scope": "queue", "name": "email", "rate": "5/s",
                                         "reason": "r", "request_id": "t-2"}, token_from="/queues")
    assert scalar(clean_db, "SELECT count(*) FROM job_limit_controls") == 1


def test_a_viewer_may_not_set_a_limit(viewer, post_form, clean_db):
    r = post_form(viewer, "/limits/set", {"scope": "queue", "name": "email", "rate": "5/s",
                                          "reason": "r", "request_id": "x"}, token_from="/queues")
    assert r.status_code == 403
    assert "limit-form" not in viewer.get("/queues").get_data(as_text=True)
    assert scalar(clean_db, "SELECT count(*) FROM job_limit_controls") == 0


def test_a_limit_needs_a_csrf_token_a_reason_and_good_values(operator, post_form, clean_db):
    r = operator.post("/limits/set", data={"scope": "queue", "name": "email", "rate": "5/s",
                                           "reason": "r", "request_id": "y"})
    assert r.status_code in (400, 403)  # no CSRF token
    for bad in ({"rate": "fast"}, {"rate": "5/s", "reason": ""}, {}, {"burst": "3"},
                {"max_concurrency": "-1"}, {"rate": "5/s", "scope": "worker"},
                {"rate": "5/s", "name": "bad name"}):
        data = {"scope": "queue", "name": "email", "reason": "r", "request_id": "z", **bad}
        r = post_form(operator, "/limits/set", data, token_from="/queues")
        assert r.status_code == 303
        assert "Nothing was changed" in operator.get("/queues").get_data(as_text=True), bad
    assert scalar(clean_db, "SELECT count(*) FROM job_limit_controls") == 0
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 0


def test_a_limit_set_from_the_console_reaches_a_running_worker(operator, post_form, clean_db,
                                                               conn):
    reg = Registry()
    job("mail", queue="email", registry=reg)(lambda ctx, payload: None)
    first = enqueue(conn, "mail", {}, registry=reg)
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, first)["status"] == "completed")
        # Hold the queue: at most 0 of its jobs at once.
        post_form(operator, "/limits/set", {
            "scope": "queue", "name": "email", "max_concurrency": "0", "reason": "hold",
            "request_id": "h1"}, token_from="/queues")
        # The worker's duty re-reads the limits every 2 s: a job enqueued after that waits.
        wait_for(lambda: scalar(clean_db, "SELECT now() - set_at > interval '3 seconds' "
                                          "FROM job_limit_controls"), timeout=10)
        held = enqueue(conn, "mail", {}, registry=reg)
        conn.commit()
        wait_for(lambda: scalar(clean_db, "SELECT now() - created_at > interval '2 seconds' "
                                          "FROM background_jobs WHERE id = %s", [held]))
        row = job_row(clean_db, held)
        assert (row["status"], row["attempts"]) == ("pending", 0)
        post_form(operator, "/limits/clear", {
            "scope": "queue", "name": "email", "reason": "go", "request_id": "h2"},
            token_from="/queues")
        wait_for(lambda: job_row(clean_db, held)["status"] == "completed", timeout=15,
                 message="the job to run once the limit is cleared")


def test_the_job_type_page_shows_its_limit(operator, post_form, clean_db):
    with psycopg.connect(clean_db) as c:  # a type a job names (another is a typo, refused)
        c.execute("INSERT INTO background_jobs (type, queue, payload) "
                  "VALUES ('report.build', 'default', '{}')")
    r = post_form(operator, "/limits/set", {
        "scope": "type", "name": "report.build", "rate": "30/m", "reason": "db load",
        "request_id": "t1", "back": "type"}, token_from="/queues")
    assert r.headers["Location"].endswith("/types/report.build")
    html = operator.get("/types/report.build").get_data(as_text=True)
    row = _limit_row(html, "type:report.build")
    assert row.one("limit-rate").text() == "30/m (burst 1)"
    assert operator.get("/types/bad name").status_code == 404


def test_the_cli_sets_lists_and_clears_a_limit(clean_db):
    env_user = os.environ.get("USER")
    with psycopg.connect(clean_db) as c:  # a type a job names (another is a typo, refused)
        c.execute("INSERT INTO background_jobs (type, queue, payload) "
                  "VALUES ('mail', 'default', '{}')")
    r = jobwarden("limits", "set", "--type", "mail", "--rate", "10/s", "--burst", "20",
                  "--reason", "provider cap", "--actor", "ops")
    assert r.returncode == 0, r.stderr
    assert "limited to 10/s (burst 20)" in r.stdout
    r = jobwarden("limits", "list")
    assert r.returncode == 0 and "mail" in r.stdout and "by ops" in r.stdout
    assert "provider cap" in r.stdout
    r = jobwarden("limits", "set", "--queue", "email", "--reason", "nothing")
    assert r.returncode == 2 and "needs a maximum concurrency, a rate or both" in r.stderr
    r = jobwarden("limits", "clear", "--type", "mail", "--reason", "done")
    assert r.returncode == 0, r.stderr
    r = jobwarden("limits", "clear", "--type", "mail", "--reason", "again")
    assert r.returncode == 1 and "no live limit" in r.stdout
    with psycopg.connect(clean_db) as c:
        actions = c.execute("SELECT actor, action FROM job_audit ORDER BY id").fetchall()
    assert actions == [("ops", "set_limit"), ("cli:" + (env_user or "unknown"), "clear_limit")]
