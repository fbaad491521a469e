"""Reconciliation hooks: a type's reconciler settles its unknown jobs, audited."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import psycopg
import pytest

from jobwarden import Registry, job
from jobwarden.worker.ops.operations import retry_job
from jobwarden.worker.ops.reconcile import DONE, NOT_DONE, RECONCILE_TYPE, UNKNOWN, reconcile
from tests.console_support import login
from tests.helpers import job_row, running_worker, scalar, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


@pytest.fixture
def unknown_charges(conn):
    """Four charges whose outcome is unknown; the provider captured #1 and declined #2."""
    conn.execute("DROP TABLE IF EXISTS provider_charges")
    conn.execute("CREATE TABLE provider_charges (order_ref text PRIMARY KEY, state text)")
    conn.execute("INSERT INTO provider_charges VALUES ('o-1', 'captured'), ('o-2', 'declined')")
    ids = {}
    for order in ("o-1", "o-2", "o-3", "provider-down"):
        ids[order] = conn.execute(
            "INSERT INTO background_jobs (type, payload, status, attempts, last_error_code) "
            "VALUES ('charge', jsonb_build_object('order', %s::text), 'unknown', 1, 'UNKNOWN') "
            "RETURNING id", [order]).fetchone()[0]
    conn.commit()
    return ids


def audit(url: str) -> list[tuple]:
    with psycopg.connect(url) as c:
        return c.execute("SELECT job_id, action, actor FROM job_audit ORDER BY job_id").fetchall()


def test_reconcile_auto_settles_what_the_reconciler_knows(unknown_charges, clean_db):
    ids = unknown_charges
    result = subprocess.run(
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "reconcile", "--auto",
         "--app", "tests.apps.reconcile_app", "--actor", "ops"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": clean_db}, capture_output=True, text=True,
        timeout=120)
    assert result.returncode == 0, result.stderr
    assert "1 done (marked completed), 1 not done (retried), 2 still unknown" in result.stdout
    assert [job_row(clean_db, ids[o])["status"] for o in ("o-1", "o-2", "o-3", "provider-down")] \
        == ["completed", "pending", "unknown", "unknown"]
    # what it said of the two it left for a person stays on their rows, audited once
    assert [job_row(clean_db, ids[o])["reconcile_verdict"] for o in ("o-3", "provider-down")] \
        == ["unknown", "error"]
    settled = [(ids["o-1"], "mark_completed", "ops"), (ids["o-2"], "retry", "ops"),
               (ids["o-3"], "reconcile", "ops"), (ids["provider-down"], "reconcile", "ops")]
    assert audit(clean_db) == settled
    again = subprocess.run(
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "reconcile", "--auto",
         "--app", "tests.apps.reconcile_app", "--actor", "ops"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": clean_db}, capture_output=True, text=True,
        timeout=120)
    assert "2 still unknown" in again.stdout, again.stderr
    assert audit(clean_db) == settled  # the same verdicts: nothing more to audit


def test_a_retry_clears_the_verdict_of_the_outcome_it_was_about(unknown_charges, conn,
                                                                   clean_db):
    reg = Registry()
    job("charge", reconciler=lambda review_job: UNKNOWN, registry=reg)(lambda c, p: None)
    reconcile(conn, reg, actor="ops")
    conn.commit()
    job_id = unknown_charges["o-3"]
    assert job_row(clean_db, job_id)["reconcile_verdict"] == "unknown"
    retry_job(conn, job_id, actor="ops", role="operator", reason="ran it by hand")
    conn.commit()
    assert job_row(clean_db, job_id)["reconcile_verdict"] is None


def test_a_verdict_outside_the_three_leaves_the_job_for_a_person(conn, clean_db):
    reg = Registry()
    job("odd", reconciler=lambda review_job: "probably", registry=reg)(lambda c, p: None)
    job_id = conn.execute("INSERT INTO background_jobs (type, payload, status) "
                          "VALUES ('odd', '{}', 'unknown') RETURNING id").fetchone()[0]
    verdicts = reconcile(conn, reg, actor="ops")
    assert verdicts == {DONE: [], NOT_DONE: [], UNKNOWN: [job_id]}
    conn.commit()
    assert job_row(clean_db, job_id)["status"] == "unknown"
    assert job_row(clean_db, job_id)["reconcile_verdict"] == "error"
    assert scalar(clean_db, "SELECT details->>'verdict' FROM job_audit "
                            "WHERE action = 'reconcile'") == "error"


def test_the_console_has_a_worker_run_the_reconcilers_audited_as_the_operator(
        operator, post_form, unknown_charges, clean_db, monkeypatch):
    ids = unknown_charges
    page = operator.get("/review").get_data(as_text=True)
    assert 'data-action="reconcile"' in page
    response = post_form(operator, "/review/reconcile",
                         {"reason": "after the provider outage", "request_id": "r-1"},
                         token_from="/review")
    assert response.status_code == 303
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE type = %s",
                  [RECONCILE_TYPE]) == 1
    monkeypatch.setenv("DATABASE_URL", clean_db)  # the app's reconciler reads it
    from tests.apps import reconcile_app
    reg = Registry()
    job("charge", repeat_safe=False, reconciler=reconcile_app.check_charge,
        registry=reg)(lambda c, p: None)
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, ids["o-1"])["status"] == "completed")
        wait_for(lambda: scalar(clean_db, "SELECT status FROM background_jobs WHERE type = %s",
                                [RECONCILE_TYPE]) == "completed")
    assert audit(clean_db)[:2] == [(ids["o-1"], "mark_completed", "otto"),
                                   (ids["o-2"], "retry", "otto")]
    assert "after the provider outage" in scalar(
        clean_db, "SELECT reason FROM job_audit WHERE action = 'mark_completed'")


def test_each_operators_request_for_the_reconcilers_is_recorded_as_theirs(
        app, users, post_form, clean_db):
    """Two operators pressing Run reconcilers before a worker runs it: each request is
    audited at once as its operator's, with the reason redacted, and each operator's
    decisions come from a job of their own; no payload holds the secret a reason had."""
    otto, ada = app.test_client(), app.test_client()
    assert login(otto, "otto").status_code == 303 and login(ada, "ada").status_code == 303

    def ask(client, reason: str, request_id: str) -> str:
        response = post_form(client, "/review/reconcile",
                             {"reason": reason, "request_id": request_id})
        assert response.status_code == 303
        page = client.get(response.headers["Location"]).get_data(as_text=True)
        return re.search(r"Reconcilers requested \(job #(\d+)\)", page).group(1)

    otto_job = ask(otto, "otto asks: ticket 1 password=hunter2secretpw", "r-1")
    ada_job = ask(ada, "ada asks: ticket 2", "r-2")
    assert otto_job != ada_job
    assert ask(otto, "otto again", "r-3") == otto_job  # a second click: his own job
    assert ask(otto, "otto again", "r-3") == otto_job  # a resubmitted form: audited once
    rows = scalar(clean_db, "SELECT json_agg(json_build_array(actor, role, reason, "
                            "job_id::text, request_id) ORDER BY id) FROM job_audit "
                            "WHERE action = 'request_reconcile'")
    assert rows == [["otto", "operator", "otto asks: ticket 1 password=[REDACTED]", otto_job,
                     "r-1"],
                    ["ada", "admin", "ada asks: ticket 2", ada_job, "r-2"],
                    ["otto", "operator", "otto again", otto_job, "r-3"]]
    jobs = scalar(clean_db, "SELECT json_object_agg(id::text, payload) FROM background_jobs "
                            "WHERE type = %s", [RECONCILE_TYPE])
    assert {k: (v["actor"], v["role"]) for k, v in jobs.items()} == {
        otto_job: ("otto", "operator"), ada_job: ("ada", "admin")}
    assert "hunter2secretpw" not in json.dumps(jobs)
    assert "hunter2secretpw" not in scalar(clean_db, "SELECT string_agg(reason, ' ') "
                                                     "FROM job_audit")


@pytest.mark.parametrize("unreadable, why", [
    ("'{\"a\": ' || repeat('[', 3000) || repeat(']', 3000) || '}'",
     "nested deeper than the worker can read"),
    ("'{\"n\": ' || repeat('9', 5000) || '}'", "integer of more digits than the worker reads"),
], ids=["deep", "digits"])
def test_a_payload_python_cannot_read_leaves_its_job_alone_for_a_person(
        conn, clean_db, unreadable, why):
    # PostgreSQL stores both from any client (enqueue refuses them); Python's json module
    # reads neither. Before: the pass raised on reading its candidates, and no unknown job
    # of the type was ever settled again.
    asked = []

    def reconciler(review_job):
        asked.append(review_job.id)
        return DONE

    reg = Registry()
    job("charge", reconciler=reconciler, registry=reg)(lambda c, p: None)
    before = conn.execute("INSERT INTO background_jobs (type, payload, status) "
                          "VALUES ('charge', '{\"order\": \"o-1\"}', 'unknown') "
                          "RETURNING id").fetchone()[0]
    bad = conn.execute(f"INSERT INTO background_jobs (type, payload, status) "
                       f"VALUES ('charge', ({unreadable})::jsonb, 'unknown') "
                       f"RETURNING id").fetchone()[0]
    after = conn.execute("INSERT INTO background_jobs (type, payload, status) "
                         "VALUES ('charge', '{\"order\": \"o-2\"}', 'unknown') "
                         "RETURNING id").fetchone()[0]
    conn.commit()
    verdicts = reconcile(conn, reg, actor="ops")
    conn.commit()
    # Its reconciler never saw it (an empty payload could read as "not done"); the others
    # were settled by theirs.
    assert asked == [before, after]
    assert verdicts == {DONE: [before, after], NOT_DONE: [], UNKNOWN: [bad]}
    # (read column by column: the test's own psycopg cannot read the payload either)
    assert [scalar(clean_db, "SELECT status FROM background_jobs WHERE id = %s", [i])
            for i in (before, bad, after)] == ["completed", "unknown", "completed"]
    assert scalar(clean_db, "SELECT reconcile_verdict FROM background_jobs WHERE id = %s",
                  [bad]) == "error"
    reason = scalar(clean_db, "SELECT reason FROM job_audit WHERE action = 'reconcile' "
                              "AND job_id = %s", [bad])
    assert why in reason and "it needs a person" in reason, reason
