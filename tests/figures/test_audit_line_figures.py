"""The audit log one line per action: each line's count of jobs against independent counts
over job_audit, console_selections and background_jobs; one line per bulk action however
many chunks wrote it; every action on exactly one page of the keyset paging, with the
filters kept.

The actions are taken through the runtime's operations and the console's own forms, the
bulk actions in chunks of 3 (BULK_CHUNK_SIZE), so that one action writes its rows in
several statements: a retry of one job and a queue's pause by ann, a group retry, a
selection's retry in three chunks, and a selection's cancel (with its dependents choice,
so a start_bulk row) stopped after its canary, all by otto.
"""

from __future__ import annotations

import re
from datetime import datetime

import psycopg
import pytest

from jobwarden.console import create_app
from jobwarden.console.data import sample_data
from jobwarden.worker.ops.operations import pause_queue, retry_group, retry_job
from tests.console_support import csrf_token
from tests.figures.conftest import rows
from tests.figures.html_tree import Element, page

ANN = {"actor": "ann", "role": "operator"}
OTTO = {"actor": "otto", "role": "operator"}


@pytest.fixture
def app(clean_db, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret", "DATABASE_URL": clean_db,
                      "BULK_CHUNK_SIZE": 3})
    yield app
    app.extensions["jobwarden_db"].dispose()


def post(client, url: str, data: dict):
    response = client.post(url, data={**data, "csrf_token": csrf_token(client, "/jobs")})
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    return response


def selection(client, data: dict) -> str:
    location = post(client, "/bulk/select", data).headers["Location"]
    return re.search(r"/bulk/([0-9a-f-]{36})", location).group(1)


@pytest.fixture
def actions(operator, engine, clean_db):
    with engine.begin() as conn:
        single = sample_data.insert_job(conn, "send_email", "failed", queue="email")
        for _ in range(4):
            sample_data.insert_job(conn, "charge", "failed", queue="billing",
                                   error_code="E_GROUP")
        chosen = [sample_data.insert_job(conn, "report", "failed", queue="reports",
                                         error_code="E_SEL") for _ in range(7)]
        pending = [sample_data.insert_job(conn, "report", "pending", queue="reports")
                   for _ in range(5)]
    with psycopg.connect(clean_db) as conn:
        assert retry_job(conn, single, reason="single retry", **ANN).ok
        assert pause_queue(conn, "email", reason="hold email", **ANN).ok
        assert retry_group(conn, "E_GROUP", seen_until=None, reason="group retry",
                           **OTTO).jobs == 4
        conn.commit()
    retried = selection(operator, {"action": "retry", "job_id": [str(i) for i in chosen]})
    post(operator, f"/bulk/{retried}", {"reason": "selection retry", "request_id": "r-sel"})
    for _ in range(2):  # the page's htmx asks for the next chunks, one request each
        post(operator, f"/bulk/{retried}/step", {})
    cancelled = selection(operator, {"action": "cancel", "job_id": [str(i) for i in pending]})
    post(operator, f"/bulk/{cancelled}", {"reason": "cancel canary", "request_id": "r-can",
                                          "mode": "canary", "canary": "2",
                                          "dependents": "hold"})
    post(operator, f"/bulk/{cancelled}/stop", {"reason": "enough", "request_id": "r-stop"})
    return {"retried": retried, "cancelled": cancelled}


def lines(tree: Element) -> list[dict]:
    found = []
    for tr in tree.one("audit-lines").all(lambda e: e.tag == "tr" and "data-line-id" in e.attrs):
        found.append({
            "id": int(tr["data-line-id"]), "bulk": tr.attrs.get("data-bulk-id"),
            "at": datetime.fromisoformat(tr.one("line-at").all(lambda e: e.tag == "time")[0]
                                         ["datetime"]),
            "actor": tr.one("line-actor").text(), "role": tr.one("line-role").text(),
            "action": tr.one("line-action").text(), "jobs": tr.one("line-jobs").text(),
            "reason": tr.one("line-reason").text()})
    return found


def test_each_action_is_one_line_and_a_bulk_actions_jobs_are_its_rows(operator, actions,
                                                                      clean_db):
    shown = lines(page(operator, "/audit/actions"))
    # one line per action, newest first, however many chunks wrote it
    assert [(x["actor"], x["action"], x["reason"]) for x in shown] == [
        ("otto", "stop_bulk", "enough"), ("otto", "cancel", "cancel canary"),
        ("otto", "retry", "selection retry"), ("otto", "retry", "group retry"),
        ("ann", "pause_queue", "hold email"), ("ann", "retry", "single retry")]
    assert [x["id"] for x in shown] == sorted((x["id"] for x in shown), reverse=True)
    by_bulk = {x["bulk"]: x for x in shown if x["bulk"]}
    assert len(by_bulk) == 3
    for bulk_id, line in by_bulk.items():
        ((n, first_at, chunks),) = rows(clean_db, """
            SELECT count(*) FILTER (WHERE job_id IS NOT NULL
                                    AND action NOT IN ('start_bulk', 'stop_bulk')),
                   min(at) FILTER (WHERE action <> 'stop_bulk'),
                   count(DISTINCT request_id) FILTER (WHERE job_id IS NOT NULL)
            FROM job_audit WHERE bulk_id = %s""", [bulk_id])
        assert int(line["jobs"]) == n, line
        assert line["at"] == first_at
        assert line["role"] == "operator"
        if bulk_id in actions.values():  # a selection: its own count of what it changed
            ((changed,),) = rows(clean_db, "SELECT changed FROM console_selections "
                                           "WHERE id = %s", [bulk_id])
            assert int(line["jobs"]) == changed
    # what the jobs say, counted on their own table
    ((group,), ) = rows(clean_db, "SELECT count(*) FROM background_jobs "
                                  "WHERE last_error_code = 'E_GROUP' AND status = 'pending'")
    ((sel,), ) = rows(clean_db, "SELECT count(*) FROM background_jobs "
                                "WHERE last_error_code = 'E_SEL' AND status = 'pending'")
    ((gone,), ) = rows(clean_db, "SELECT count(*) FROM background_jobs "
                                 "WHERE status = 'cancelled'")
    assert [by_bulk[actions["retried"]]["jobs"], by_bulk[actions["cancelled"]]["jobs"]] == \
        [str(sel), str(gone)] == ["7", "2"]
    assert [x["jobs"] for x in shown if x["reason"] == "group retry"] == [str(group)] == ["4"]
    # the selection's retry wrote three chunks; the cancel a start and its canary's chunk
    assert rows(clean_db, "SELECT count(DISTINCT request_id) FROM job_audit "
                          "WHERE bulk_id = %s", [actions["retried"]]) == [(3,)]
    # a single action's jobs: one for the job's retry, none for the queue's pause
    assert [x["jobs"] for x in shown if not x["bulk"]] == ["—", "—", "1"]
    # the lines the trigger kept are the lines a rebuild makes from the whole log
    kept = rows(clean_db, "SELECT * FROM job_audit_lines ORDER BY id")
    rows(clean_db, "SELECT jobwarden_audit_lines_rebuild()")
    assert rows(clean_db, "SELECT * FROM job_audit_lines ORDER BY id") == kept


def test_keyset_pages_show_every_action_once_and_keep_the_filters(operator, actions,
                                                                 clean_db):
    everything = [x["id"] for x in lines(page(operator, "/audit/actions"))]
    seen, url = [], "/audit/actions?limit=2"
    while url:
        tree = page(operator, url)
        seen += [x["id"] for x in lines(tree)]
        older = tree.all("older")
        url = older[0]["href"] if older else None
        assert url is None or "limit=2" in url
    assert seen == everything and len(seen) == 6
    # by actor, by action, both, over pages of one
    assert [x["actor"] for x in lines(page(operator, "/audit/actions?actor=ann"))] == \
        ["ann", "ann"]
    retries, url = [], "/audit/actions?action=retry&limit=1"
    while url:
        tree = page(operator, url)
        retries += [(x["actor"], x["reason"]) for x in lines(tree)]
        older = tree.all("older")
        url = older[0]["href"] if older else None
        assert url is None or ("action=retry" in url and "limit=1" in url)
    assert retries == [("otto", "selection retry"), ("otto", "group retry"),
                       ("ann", "single retry")]
    ((today,),) = rows(clean_db, "SELECT (now() AT TIME ZONE 'UTC')::date")
    assert len(lines(page(operator, f"/audit/actions?from={today}&to={today}"))) == 6
    later = today.fromordinal(today.toordinal() + 1)
    assert lines(page(operator, f"/audit/actions?from={later}")) == []
    assert lines(page(operator, f"/audit/actions?to={today.fromordinal(today.toordinal() - 1)}")) == []
