"""A failed canary steers the operator to Stop: its warning names the codes its jobs failed
again with, Stop is the main button, and Continue needs an explicit tick, checked against
the canary as it stands when pressed (not as the page showed it) and audited.

"Failed" (console/data/bulk.py, CANARY_FAILED_JOBS): at least one of the jobs the canary
retried has failed again. Both sides of that line are seeded: no job failed (one still
pending, one ended unknown) and exactly one failed.
"""

from __future__ import annotations

import html
import threading

import psycopg
import pytest

from tests.console_support import login
from tests.figures.html_tree import parse
from tests.helpers import scalar, wait_for
from tests.integration.test_bulk_chunks import (
    console_backends,
    drive,
    post,
    seed,
    select_group,
    statuses,
)

CANARY = 10


def start_canary(client, post_form, url: str, n: int = 300) -> tuple[str, list[int]]:
    group = seed(url, n, others=0)
    sel = select_group(client, post_form)
    assert post(client, f"/bulk/{sel}", {"reason": "token renewed", "request_id": "c1",
                                         "mode": "canary", "canary": str(CANARY)}
                ).status_code == 303
    return sel, group


def end_jobs(url: str, ids: list[int], status: str, code: str | None = None) -> None:
    """As a worker ends them: failed (or unknown) with `code`, or completed."""
    column = {"failed": "failed_at", "unknown": "failed_at", "completed": "completed_at"}[status]
    with psycopg.connect(url) as conn:
        conn.execute(f"UPDATE background_jobs SET status = %s, {column} = now(), "
                     "attempts = attempts + 1, last_error_code = coalesce(%s, last_error_code) "
                     "WHERE id = ANY(%s)", [status, code, ids])


def panel(client, sel: str):
    return parse(client.get(f"/bulk/{sel}/_progress").get_data(as_text=True))


def audit_rows(url: str, sel: str, action: str) -> list[dict]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT details FROM job_audit WHERE bulk_id = %s AND action = %s ORDER BY id",
            [sel, action])]


@pytest.mark.parametrize("failed", [0, 1])
def test_a_canary_fails_from_its_first_job_failed_again(operator, post_form, clean_db, failed):
    sel, group = start_canary(operator, post_form, clean_db)
    canary = group[:CANARY]
    # One pending (not ended) and one unknown (ended, but no failure) on both sides.
    end_jobs(clean_db, canary[:CANARY - 2 - failed], "completed")
    end_jobs(clean_db, canary[CANARY - 2 - failed:CANARY - 1 - failed], "unknown", "AMBIGUOUS")
    if failed:
        end_jobs(clean_db, canary[CANARY - 1 - failed:CANARY - 1], "failed", "TOKEN_REVOKED")
    doc = panel(operator, sel)
    section = doc.one("bulk-progress")
    decide = doc.one("bulk-decide")
    stop, go = decide.one("bulk-stop"), decide.one("bulk-continue")
    if not failed:
        assert section["data-canary"] == "ok" and doc.maybe("canary-failed-warning") is None
        assert decide.maybe("bulk-continue-despite") is None
        # one canary job has not ended: continue is not the main button yet
        assert "primary" not in go.attrs.get("class", "") and "primary" not in stop["class"]
        assert doc.one("canary-not-ended").text().startswith("1 of the canary's jobs")
    else:
        assert section["data-canary"] == "failed"
        warning = doc.one("canary-failed-warning")
        assert warning["role"] == "alert"
        assert (warning.one("canary-failed-again").text(), warning.one("canary-retried").text()
                ) == ("1", str(CANARY))
        code = warning.one(lambda e: e.attrs.get("data-canary-code") == "TOKEN_REVOKED")
        assert code.one("canary-code-jobs").text() == "1"
        assert code.one(lambda e: e.tag == "a")["href"] == "/failed/group?code=TOKEN_REVOKED"
        # Stop is the main action, and comes first; continue is secondary and needs a tick.
        assert stop["class"].split() == ["primary", "danger"]
        assert "primary" not in go.attrs.get("class", "")
        tick = decide.one("bulk-continue-despite")
        assert "required" in tick.attrs and tick["name"] == "despite_failed_canary"
        assert [e.attrs.get("data-testid") for e in decide.walk()
                if e.attrs.get("data-testid") in ("bulk-stop", "bulk-continue")] == \
            ["bulk-stop", "bulk-continue"]
        assert "Continue anyway" in go.text()

    # Continue without the tick: refused past a failed canary, nothing changed.
    post(operator, f"/bulk/{sel}/continue")
    if failed:
        flashed = html.unescape(operator.get(f"/bulk/{sel}").get_data(as_text=True))
        assert "The canary failed: 1 of its 10 retried job(s) failed again " \
               "(TOKEN_REVOKED 1)" in flashed
        assert scalar(clean_db, "SELECT state FROM console_selections") == "canary"
        assert audit_rows(clean_db, sel, "continue_bulk") == []
        assert scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                "WHERE status = 'failed'") == 300 - CANARY + failed
        post(operator, f"/bulk/{sel}/continue", {"despite_failed_canary": "1"})
    # 290 jobs are one chunk: the continue did it
    assert scalar(clean_db, "SELECT state FROM console_selections") == "done"
    (details,) = audit_rows(clean_db, sel, "continue_bulk")
    assert details == {
        "bulk_action": "retry", "canary": CANARY, "jobs": 300, "canary_changed": CANARY,
        "canary_failed": bool(failed), "despite_failed_canary": bool(failed),
        "failed_again": failed, "not_ended": 1,
        "failed_by_code": {"TOKEN_REVOKED": 1} if failed else {}}
    log = parse(operator.get(f"/audit?bulk={sel}&action=continue_bulk").get_data(as_text=True))
    assert len(log.one("audit-log").having("data-audit-id")) == 1
    despite = log.maybe("audit-despite-failed-canary")
    assert (despite is not None) is bool(failed)
    if failed:
        assert despite.text() == "despite a failed canary (1 failed again)"
    # the summary still counts only the jobs the action changed
    assert log.one("bulk-count").text() == "300"


def test_a_canary_job_that_fails_after_the_page_loaded_still_stops_continue(
        operator, post_form, clean_db):
    """The page showed a canary still running, nothing failed; a job fails before the
    operator presses Continue: the continue is checked against the canary as it is now."""
    sel, group = start_canary(operator, post_form, clean_db)
    shown = panel(operator, sel)
    assert shown.one("bulk-progress")["data-canary"] == "ok"
    assert shown.one("canary-pending").text() == str(CANARY)
    end_jobs(clean_db, group[:1], "failed", "AUTH_FAILED")
    post(operator, f"/bulk/{sel}/continue")
    assert scalar(clean_db, "SELECT state FROM console_selections") == "canary"
    assert statuses(clean_db) == {"pending": CANARY - 1, "failed": 300 - CANARY + 1}
    assert panel(operator, sel).one("bulk-progress")["data-canary"] == "failed"


def test_a_canary_job_left_alone_is_no_failure_of_the_canary(
        operator, post_form, clean_db, app):
    """A job of the canary another operator retried after the review, and which failed
    again, was not retried by this action (left alone): it is not its canary's outcome."""
    group = seed(clean_db, 300, others=0)
    sel = select_group(operator, post_form)
    ada = app.test_client()
    login(ada, "ada")
    assert post(ada, f"/jobs/{group[0]}/retry", {
        "reason": "mine", "request_id": "ada-1", "expected_status": "failed"}
        ).status_code == 303
    end_jobs(clean_db, group[:1], "failed", "AUTH_FAILED")
    post(operator, f"/bulk/{sel}", {"reason": "r", "request_id": "c1", "mode": "canary",
                                    "canary": str(CANARY)})
    end_jobs(clean_db, group[1:CANARY], "completed")
    doc = panel(operator, sel)
    assert doc.one("bulk-left-alone").text() == "1"
    assert doc.one("bulk-progress")["data-canary"] == "ok"
    assert (doc.one("canary-failed-warning").text() if doc.maybe("canary-failed-warning") else None) is None
    assert doc.one("canary-completed").text() == str(CANARY - 1)
    assert "primary" in doc.one("bulk-continue")["class"]


def test_continue_and_stop_pressed_at_once_leave_one_consistent_story(
        operator, post_form, clean_db):
    """Continue and Stop of the same action land together (two tabs): the selection row's
    lock orders them. Either continue then stop (a continue_bulk row, at most the chunk it
    started) or stop then a refused continue; never a continue after the stop."""
    sel, group = start_canary(operator, post_form, clean_db, n=3000)
    holder = psycopg.connect(clean_db)
    holder.execute("SELECT 1 FROM console_selections WHERE id = %s FOR UPDATE", [sel])
    threads = [
        threading.Thread(target=post, args=(operator, f"/bulk/{sel}/continue")),
        threading.Thread(target=post, args=(operator, f"/bulk/{sel}/stop", {
            "reason": "looks wrong", "request_id": "stop-1"})),
    ]
    for t in threads:
        t.start()
    wait_for(lambda: len(console_backends(clean_db, waiting=True)) == 2,
             message="both requests waiting for the selection's row")
    holder.rollback()
    holder.close()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive()
    assert scalar(clean_db, "SELECT state FROM console_selections") == "stopped"
    assert len(audit_rows(clean_db, sel, "stop_bulk")) == 1
    continued = audit_rows(clean_db, sel, "continue_bulk")
    changed = scalar(clean_db, "SELECT count(*) FROM job_audit WHERE bulk_id = %s "
                               "AND job_id IS NOT NULL", [sel])
    stopped_at = audit_rows(clean_db, sel, "stop_bulk")[0]
    if continued:  # continue first: the stop found it running, after 0 or 1 more chunk
        assert stopped_at["state_was"] == "running"
        assert changed in (CANARY, CANARY + 1000)
    else:
        assert stopped_at["state_was"] == "canary" and changed == CANARY
    assert scalar(clean_db, "SELECT changed FROM console_selections") == changed
    assert stopped_at["dealt_with"] == changed


def test_two_continues_at_once_continue_once(operator, post_form, clean_db):
    sel, _ = start_canary(operator, post_form, clean_db, n=3000)
    holder = psycopg.connect(clean_db)
    holder.execute("SELECT 1 FROM console_selections WHERE id = %s FOR UPDATE", [sel])
    threads = [threading.Thread(target=post, args=(operator, f"/bulk/{sel}/continue"))
               for _ in range(2)]
    for t in threads:
        t.start()
    wait_for(lambda: len(console_backends(clean_db, waiting=True)) == 2,
             message="both continues waiting for the selection's row")
    holder.rollback()
    holder.close()
    for t in threads:
        t.join(timeout=30)
    assert len(audit_rows(clean_db, sel, "continue_bulk")) == 1
    drive(operator, sel)
    assert scalar(clean_db, "SELECT state FROM console_selections") == "done"
    assert scalar(clean_db, "SELECT count(*) FROM job_audit WHERE job_id IS NOT NULL") == 3000


def test_another_operator_and_a_viewer_can_neither_continue_nor_stop(
        operator, post_form, clean_db, app):
    sel, group = start_canary(operator, post_form, clean_db)
    end_jobs(clean_db, group[:CANARY], "failed", "AUTH_FAILED")
    ada, vera = app.test_client(), app.test_client()
    login(ada, "ada")
    login(vera, "vera")
    for url in (f"/bulk/{sel}", f"/bulk/{sel}/_progress"):
        assert ada.get(url).status_code == 404  # someone else's: not found, nothing said
        assert vera.get(url).status_code == 403
    for action, data in (("continue", {"despite_failed_canary": "1"}),
                         ("stop", {"reason": "r", "request_id": "x"})):
        assert post(ada, f"/bulk/{sel}/{action}", data).status_code == 404
        assert post(vera, f"/bulk/{sel}/{action}", data).status_code == 403
    assert scalar(clean_db, "SELECT state FROM console_selections") == "canary"
    assert scalar(clean_db, "SELECT count(*) FROM job_audit WHERE job_id IS NULL") == 0
    # nor does a viewer see any bulk action where an operator does
    group = vera.get("/failed/group?code=AUTH_FAILED").get_data(as_text=True)
    assert 'data-testid="bulk-retry"' not in group and "Your role is read-only" in group
    assert 'data-testid="bulk-retry"' in operator.get(
        "/failed/group?code=AUTH_FAILED").get_data(as_text=True)


@pytest.mark.parametrize("path", [
    "/bulk/not-a-uuid/_progress", "/bulk/00000000-0000-0000-0000-000000000000/_progress",
    "/bulk/%27%3B--/_progress", "/bulk/" + "9" * 5000 + "/_progress",
])
def test_the_progress_fragment_answers_a_bad_id_with_a_404(operator, path):
    assert operator.get(path).status_code == 404
