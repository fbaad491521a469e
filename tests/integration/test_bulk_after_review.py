"""A bulk action acts only on what the review showed: each job as it stood when selected,
a selection of the last hour, the rest after the canary, and a stop that is audited."""

from __future__ import annotations

import html
import threading

import psycopg
import pytest

from jobwarden.worker.ops.operations import retry_job
from tests.console_support import login
from tests.helpers import scalar, wait_for
from tests.integration.test_bulk_chunks import (
    SELECTION,
    console_backends,
    drive,
    pending_ids,
    post,
    seed,
    statuses,
)


def signed_in(app, username: str):
    client = app.test_client()
    assert login(client, username).status_code == 303
    return client


def select(client, data: dict) -> str:
    response = post(client, "/bulk/select", data)
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    return SELECTION.search(response.headers["Location"]).group(1)


def status_of(url: str, ids: list[int]) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT DISTINCT status FROM background_jobs WHERE id = ANY(%s)", [ids])}


def test_jobs_another_operator_retried_after_the_review_are_left_alone(app, clean_db):
    """Otto reviews a skip of a group, failed and pending; Ada retries some of its failed
    jobs before he starts, one while his chunk runs, and some of hers fail again."""
    otto, ada = signed_in(app, "otto"), signed_in(app, "ada")
    group = seed(clean_db, 40, others=0)  # failed, newest first
    with psycopg.connect(clean_db) as conn:  # five of the group were pending when reviewed
        conn.execute("UPDATE background_jobs SET status = 'pending', failed_at = NULL "
                     "WHERE id = ANY(%s)", [group[35:]])
    reviewed_pending = group[35:]
    sel = select(otto, {"action": "skip", "all_matching": "1", "error_code": "AUTH_FAILED"})
    review = otto.get(f"/bulk/{sel}").get_data(as_text=True)
    assert 'data-testid="selected-count">40<' in review

    # Ada retries ten of the failed ones from their pages (now pending: skip allows
    # pending, but these were reviewed as failed), and five more that then fail again
    # (failed as reviewed, but not the failure the review showed).
    retried, failed_again = group[0:10], group[10:15]
    for job_id in retried + failed_again:
        response = post(ada, f"/jobs/{job_id}/retry", {
            "reason": "mine", "request_id": f"ada-{job_id}", "expected_status": "failed"})
        assert response.status_code == 303
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE background_jobs SET status = 'failed', failed_at = now(), "
                     "attempts = attempts + 1 WHERE id = ANY(%s)", [failed_again])
    assert status_of(clean_db, retried) == {"pending"}

    # And one in the middle of the race: her retry holds its row while Otto's chunk runs.
    racing = group[20]
    holder = psycopg.connect(clean_db)
    assert retry_job(holder, racing, actor="console:ada", role="admin", reason="mine").ok
    start = threading.Thread(target=post, args=(otto, f"/bulk/{sel}", {
        "reason": "not needed", "request_id": "race-1", "mode": "all"}))
    start.start()
    wait_for(lambda: console_backends(clean_db, waiting=True),
             message="Otto's chunk to wait for the job Ada is retrying")
    holder.commit()
    holder.close()
    start.join(timeout=30)
    assert not start.is_alive()

    moved = retried + failed_again + [racing]
    untouched = [i for i in group[:35] if i not in moved]
    assert status_of(clean_db, retried + [racing]) == {"pending"}
    assert status_of(clean_db, failed_again) == {"failed"}
    assert status_of(clean_db, untouched + reviewed_pending) == {"skipped"}
    with psycopg.connect(clean_db) as conn:
        skipped_by_bulk = {r[0] for r in conn.execute(
            "SELECT job_id FROM job_audit WHERE bulk_id = %s", [sel])}
        left = conn.execute("SELECT changed, left_alone FROM console_selections "
                            "WHERE id = %s", [sel]).fetchone()
    assert skipped_by_bulk == set(untouched + reviewed_pending)
    assert left == (len(untouched) + 5, len(moved))


@pytest.mark.parametrize("minutes, starts", [(59, True), (61, False)])
def test_a_selection_starts_only_within_the_hour_after_its_review(
        operator, clean_db, minutes, starts):
    group = seed(clean_db, 5, others=0)
    sel = select(operator, {"action": "retry", "all_matching": "1", "status": "failed",
                            "error_code": "AUTH_FAILED"})
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE console_selections SET created_at = now() - "
                     "make_interval(mins => %s) WHERE id = %s", [minutes, sel])
    review = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    assert ("made over an hour ago" not in review) is starts
    page = post(operator, f"/bulk/{sel}", {"reason": "late", "request_id": f"h{minutes}",
                                           "mode": "all"})
    assert page.status_code == 303
    if starts:
        assert pending_ids(clean_db) == set(group)
    else:
        assert statuses(clean_db) == {"failed": 5}
        assert scalar(clean_db, "SELECT state FROM console_selections") == "reviewed"
        assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 0


def test_continue_is_refused_while_the_canarys_chunks_are_still_to_do(operator, clean_db):
    group = seed(clean_db, 3000, others=0)
    sel = select(operator, {"action": "retry", "all_matching": "1", "status": "failed",
                            "error_code": "AUTH_FAILED"})
    # A canary of 1,500 is two chunks: the start does the first.
    post(operator, f"/bulk/{sel}", {"reason": "canary", "request_id": "k1",
                                    "mode": "canary", "canary": "1500"})
    assert pending_ids(clean_db) == set(group[:1000])
    refused = post(operator, f"/bulk/{sel}/continue")
    assert refused.status_code == 303
    page = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    assert "The canary is not done yet" in html.unescape(page)
    assert scalar(clean_db, "SELECT state FROM console_selections") == "canary"
    drive(operator, sel)  # the page finishes the canary, and stops there
    assert pending_ids(clean_db) == set(group[:1500])
    assert scalar(clean_db, "SELECT state FROM console_selections") == "canary"
    # Once the canary is done, continue goes on with the rest.
    assert post(operator, f"/bulk/{sel}/continue").status_code == 303
    drive(operator, sel)
    assert pending_ids(clean_db) == set(group)


def test_stopping_a_bulk_action_is_audited_with_who_why_and_when(operator, clean_db):
    seed(clean_db, 3000, others=0)
    sel = select(operator, {"action": "retry", "all_matching": "1", "status": "failed",
                            "error_code": "AUTH_FAILED"})
    post(operator, f"/bulk/{sel}", {"reason": "try 5%", "request_id": "s1",
                                    "mode": "canary", "canary": "5%"})
    page = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    assert 'data-testid="bulk-stop-reason"' in page
    # Without a reason nothing stops.
    post(operator, f"/bulk/{sel}/stop", {"request_id": "stop-0"})
    assert scalar(clean_db, "SELECT state FROM console_selections") == "canary"
    assert post(operator, f"/bulk/{sel}/stop", {
        "reason": "canary failed again", "request_id": "stop-1"}).status_code == 303
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute(
            "SELECT actor, role, reason, request_id, job_id, details, at <= now(), "
            "at >= (SELECT used_at FROM console_selections) FROM job_audit "
            "WHERE bulk_id = %s AND action = 'stop_bulk'", [sel]).fetchall()
        state = conn.execute("SELECT state, finished_at IS NOT NULL FROM console_selections"
                             ).fetchone()
    assert state == ("stopped", True)
    assert len(rows) == 1
    actor, role, reason, request_id, job_id, details, before_now, after_start = rows[0]
    assert (actor, role, reason, request_id, job_id) == (
        "otto", "operator", "canary failed again", "stop-1", None)
    assert details == {"bulk_action": "retry", "state_was": "canary", "dealt_with": 150,
                       "jobs": 3000}
    assert before_now and after_start
    # The audit log shows it; the bulk's summary still counts the 150 jobs it changed.
    audit = operator.get(f"/audit?bulk={sel}").get_data(as_text=True)
    assert "stop_bulk" in audit and "canary failed again" in audit
    assert 'data-testid="bulk-count">150<' in audit
    # A second stop finds it ended: refused, and no second row.
    post(operator, f"/bulk/{sel}/stop", {"reason": "again", "request_id": "stop-2"})
    assert scalar(clean_db, "SELECT count(*) FROM job_audit WHERE action = 'stop_bulk'") == 1
