"""An operator's cancel or skip decides what becomes of the jobs waiting for it, in the
console's reviewed actions: the one-job forms and the bulk review (docs/guide/flows.md).

The form offers the choice only when some job waits, shows how many each choice would
touch, and the audit records the choice: on the parent's row (details.dependents), on
each job a bulk action changed, and once for the bulk action (`start_bulk`).
"""

from __future__ import annotations

import re
import threading

import psycopg
import pytest

from jobwarden.console.data import sample_data
from jobwarden.worker.ops import operations
from tests.helpers import job_row


@pytest.fixture
def chain(engine):
    """p (pending) <- a (waiting) <- b (waiting); p <- c (waiting, run_anyway); q (pending)
    alone. `c` runs whatever p ends as; `b` also waits for the completed `done`."""
    with engine.begin() as conn:
        ids = {name: sample_data.insert_job(conn, "step", status) for name, status in (
            ("p", "pending"), ("a", "waiting"), ("b", "waiting"), ("c", "waiting"),
            ("q", "pending"), ("done", "completed"))}
        sample_data.insert_edge(conn, ids["a"], ids["p"])
        sample_data.insert_edge(conn, ids["b"], ids["a"])
        sample_data.insert_edge(conn, ids["b"], ids["done"], released=True)
        sample_data.insert_edge(conn, ids["c"], ids["p"], run_anyway=True)
    return ids


def previews(html: str) -> dict[str, dict[str, str]]:
    """Each action form's preview counts: action -> {choice: count}."""
    found = {}
    for action, form in re.findall(r'data-action="(\w+)"(.*?)</form>', html, re.S):
        counts = dict(re.findall(r'data-testid="preview-(\w+)">(\d+)<', form))
        if counts:
            found[action] = counts
    return found


def audit(url: str, job_id: int) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT action, to_status, details->>'dependents', "
                            "details->'with_parents' FROM job_audit WHERE job_id = %s "
                            "ORDER BY id", [job_id]).fetchall()


def test_the_job_page_offers_the_choice_with_what_each_touches(operator, chain):
    html = operator.get(f"/jobs/{chain['p']}").get_data(as_text=True)
    # hold: a stays (c runs anyway); cancel: a and b; release: a and c, neither has
    # another edge left, so both could run at once
    expected = {"hold": "1", "cancel": "2", "release": "2", "start": "2"}
    assert previews(html) == {"cancel": expected, "skip": expected}
    assert 'name="dependents" value="hold" checked' in html
    # A job no job waits for: no choice offered.
    assert 'data-testid="dependents-choice"' not in operator.get(
        f"/jobs/{chain['q']}").get_data(as_text=True)


@pytest.mark.parametrize("choice, a, b, c", [
    ("hold", "waiting", "waiting", "pending"),
    ("cancel", "cancelled", "cancelled", "pending"),
    ("release", "pending", "waiting", "pending"),
])
def test_a_cancel_does_what_the_operator_chose_and_the_audit_says_so(
        operator, post_form, chain, clean_db, choice, a, b, c):
    response = post_form(operator, f"/jobs/{chain['p']}/cancel", {
        "reason": "bad import", "request_id": f"r-{choice}", "expected_status": "pending",
        "dependents": choice}, follow_redirects=True)
    assert response.status_code == 200 and "was cancelled" in response.get_data(as_text=True)
    assert [job_row(clean_db, chain[n])["status"] for n in "pabc"] == ["cancelled", a, b, c]
    assert audit(clean_db, chain["p"]) == [("cancel", "cancelled", choice, None)]
    if choice == "cancel":
        assert audit(clean_db, chain["b"]) == [("cancel", "cancelled", None, [chain["p"]])]


def test_a_skip_takes_the_choice_too(operator, post_form, chain, clean_db):
    post_form(operator, f"/jobs/{chain['a']}/skip", {
        "reason": "not needed", "request_id": "s1", "expected_status": "waiting",
        "dependents": "release"})
    assert job_row(clean_db, chain["a"])["status"] == "skipped"
    assert job_row(clean_db, chain["b"])["status"] == "pending"  # its other parent completed
    assert audit(clean_db, chain["a"])[0][2] == "release"


@pytest.mark.parametrize("bad", ["drop", "CANCEL", "hold ", "x" * 300])
def test_a_choice_that_is_none_changes_nothing_with_one_line(operator, post_form, chain,
                                                              clean_db, bad):
    html = post_form(operator, f"/jobs/{chain['p']}/cancel", {
        "reason": "x", "request_id": "bad", "expected_status": "pending",
        "dependents": bad}, follow_redirects=True).get_data(as_text=True)
    assert "Choose what becomes of its dependents: hold, cancel, release." in html
    assert job_row(clean_db, chain["p"])["status"] == "pending"
    assert audit(clean_db, chain["p"]) == []


def test_a_viewer_probing_the_actions_changes_nothing(viewer, post_form, chain, clean_db):
    html = viewer.get(f"/jobs/{chain['p']}").get_data(as_text=True)
    assert 'data-testid="dependents-choice"' not in html  # no forms for a viewer
    assert viewer.get(f"/flows/{chain['p']}").status_code == 200  # reading is allowed
    for path, data in ((f"/jobs/{chain['p']}/cancel", {"dependents": "cancel"}),
                       (f"/jobs/{chain['p']}/skip", {"dependents": "release"}),
                       ("/bulk/select", {"action": "cancel", "job_id": str(chain["p"])})):
        response = post_form(viewer, path, {"reason": "x", "request_id": "v", **data})
        assert response.status_code == 403, path
    assert job_row(clean_db, chain["p"])["status"] == "pending"
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*) FROM job_audit").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM console_selections").fetchone()[0] == 0


def test_two_operators_racing_to_cancel_with_dependents_decide_once(
        operator, post_form, chain, clean_db):
    """Both saw the parent pending; the one whose transaction commits first decides. The
    second waits on the parent's row, then finds it cancelled: refused, its own choice
    applied to nobody."""
    first = psycopg.connect(clean_db)
    try:
        first_result = operations.cancel_job(first, chain["p"], actor="ana", role="operator",
                                             reason="first", expected_status="pending",
                                             dependents="release")
        assert first_result.ok  # its transaction is still open: it holds p's row
        second: list[operations.ActionResult] = []
        racer = threading.Thread(target=lambda: second.append(_cancel_in_console(
            operator, post_form, chain["p"])))
        racer.start()
        racer.join(timeout=1.0)
        assert racer.is_alive(), "the second cancel did not wait for the first's row lock"
        first.commit()
        racer.join(timeout=30)
    finally:
        first.close()
    assert "is now cancelled" in second[0]
    assert [job_row(clean_db, chain[n])["status"] for n in "pabc"] == \
        ["cancelled", "pending", "waiting", "pending"]  # released, as the first chose
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute("SELECT actor, details->>'dependents' FROM job_audit "
                            "WHERE action = 'cancel' ORDER BY id").fetchall()
    assert rows == [("ana", "release")]


def _cancel_in_console(client, post_form, job_id: int) -> str:
    return post_form(client, f"/jobs/{job_id}/cancel", {
        "reason": "second", "request_id": "race-2", "expected_status": "pending",
        "dependents": "cancel"}, follow_redirects=True).get_data(as_text=True)


# -- the bulk review -----------------------------------------------------------------------

def select(post_form, client, data: dict) -> str:
    response = post_form(client, "/bulk/select", data)
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    return re.search(r"/bulk/([0-9a-f-]{36})", response.headers["Location"]).group(1)


@pytest.fixture
def two_flows(engine):
    """Two pending parents, each with two waiting dependents; one parent's dependent is
    itself selected; and a lone pending job."""
    with engine.begin() as conn:
        ids = {n: sample_data.insert_job(conn, "import.row", "pending") for n in ("p1", "p2")}
        for p in ("p1", "p2"):
            for k in (1, 2):
                ids[f"{p}d{k}"] = sample_data.insert_job(conn, "import.mail", "waiting")
                sample_data.insert_edge(conn, ids[f"{p}d{k}"], ids[p])
        ids["lone"] = sample_data.insert_job(conn, "import.row", "pending")
    return ids


def test_the_bulk_review_offers_the_choice_only_when_jobs_wait(operator, post_form, two_flows):
    sel = select(post_form, operator, {"action": "cancel", "job_id": [
        str(two_flows[n]) for n in ("p1", "p2", "p2d1")]})
    html = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    # p2d1 is cancelled by the action itself: the choice touches the other three
    assert dict(re.findall(r'data-testid="preview-(\w+)">(\d+)<', html)) == {
        "hold": "3", "cancel": "3", "release": "3", "start": "3"}
    alone = select(post_form, operator, {"action": "cancel",
                                         "job_id": str(two_flows["lone"])})
    assert 'data-testid="dependents-choice"' not in operator.get(
        f"/bulk/{alone}").get_data(as_text=True)
    retry = select(post_form, operator, {"action": "retry", "job_id": str(two_flows["p1"])})
    assert 'data-testid="dependents-choice"' not in operator.get(
        f"/bulk/{retry}").get_data(as_text=True)


def test_a_bulk_cancel_keeps_the_choice_across_its_chunks_and_audits_it(
        operator, post_form, two_flows, clean_db):
    sel = select(post_form, operator, {"action": "cancel", "job_id": [
        str(two_flows["p1"]), str(two_flows["p2"])]})
    # A canary of one job: the first chunk runs with the start, the rest after continue.
    post_form(operator, f"/bulk/{sel}", {"reason": "bad batch", "request_id": "b1",
                                         "mode": "canary", "canary": "1",
                                         "dependents": "cancel"})
    assert job_row(clean_db, two_flows["p2"])["status"] == "cancelled"  # the newest first
    assert job_row(clean_db, two_flows["p1"])["status"] == "pending"
    post_form(operator, f"/bulk/{sel}/continue", {})
    statuses = {n: job_row(clean_db, i)["status"] for n, i in two_flows.items()}
    assert statuses == {"p1": "cancelled", "p2": "cancelled", "p1d1": "cancelled",
                        "p1d2": "cancelled", "p2d1": "cancelled", "p2d2": "cancelled",
                        "lone": "pending"}
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute("SELECT action, job_id IS NULL, details->>'dependents' "
                            "FROM job_audit WHERE bulk_id = %s AND (details ? 'dependents' "
                            "OR action = 'start_bulk') ORDER BY id", [sel]).fetchall()
    assert rows == [("start_bulk", True, "cancel"), ("cancel", False, "cancel"),
                    ("cancel", False, "cancel")]
    log = operator.get(f"/audit?bulk={sel}").get_data(as_text=True)
    assert 'data-testid="bulk-count">6<' in log  # two parents and their four dependents


def test_a_bulk_with_a_bad_choice_does_not_start(operator, post_form, two_flows, clean_db):
    sel = select(post_form, operator, {"action": "skip", "job_id": str(two_flows["p1"])})
    html = post_form(operator, f"/bulk/{sel}", {"reason": "x", "request_id": "b2",
                                                "dependents": "everything"},
                     follow_redirects=True).get_data(as_text=True)
    assert "Choose what becomes of its dependents" in html
    assert job_row(clean_db, two_flows["p1"])["status"] == "pending"
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT used_at FROM console_selections").fetchone()[0] is None
