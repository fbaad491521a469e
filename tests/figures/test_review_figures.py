"""Needs review's figures: each group of unknown jobs (type, error code, reconciler's
verdict), its count, its newest job, the count on its decision buttons, its cards and the
selection a decision stores — each against an independent count over background_jobs,
computed here from its rows, never with the page's query.

The dataset is written through the runtime's statements (claims, outcomes, the
reconciler, an operator's retry) and sits on both sides of each boundary: unknown jobs
beside failed and completed ones of the same type and code; one code in two types; jobs
with no code; the reconciler's three answers that leave a job unknown (none, could not
tell, failed) and the two that settle it (done: completed; not done: retried, pending);
a job it could not tell about, retried by an operator and unknown again (its verdict
cleared), beside the two it retried, completed.
"""

from __future__ import annotations

import re
from collections import Counter

import psycopg
import pytest

from jobwarden import Registry, enqueue, job
from jobwarden.console.data.review import VERDICTS
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.ops.operations import retry_job
from jobwarden.worker.ops.reconcile import DONE, NOT_DONE, UNKNOWN, reconcile
from tests.console_support import post_form
from tests.figures.html_tree import page

LEASE = 30.0
WORKER = "review-host:1:ab"
#: (type, outcome, status, code, the reconciler's answer, how many)
PLAN = [
    ("pay.charge", O.UNKNOWN, S.UNKNOWN, "GATEWAY_TIMEOUT", UNKNOWN, 5),
    ("pay.charge", O.UNKNOWN, S.UNKNOWN, "GATEWAY_TIMEOUT", "raise", 3),
    ("pay.charge", O.UNKNOWN, S.UNKNOWN, "GATEWAY_TIMEOUT", DONE, 2),
    ("pay.charge", O.UNKNOWN, S.UNKNOWN, "GATEWAY_TIMEOUT", NOT_DONE, 2),
    ("pay.charge", O.UNKNOWN, S.UNKNOWN, None, UNKNOWN, 2),
    ("pay.charge", O.FAILED, S.FAILED, "GATEWAY_TIMEOUT", None, 4),
    ("pay.charge", O.COMPLETED, S.COMPLETED, None, None, 3),
    ("crm.sync", O.UNKNOWN, S.UNKNOWN, "GATEWAY_TIMEOUT", None, 4),
    ("crm.sync", O.UNKNOWN, S.UNKNOWN, "CRM_DOWN", None, 1),
    ("crm.sync", O.UNKNOWN, S.UNKNOWN, None, None, 2),
    ("crm.sync", O.FAILED, S.FAILED, "CRM_DOWN", None, 2),
]


def _answer(review_job):
    said = review_job.payload["reconciler"]
    if said == "raise":
        raise ConnectionError("provider API unreachable")
    return said


@pytest.fixture
def unknowns(clean_db) -> str:
    reg = Registry()
    job("pay.charge", queue="billing", lease=LEASE, max_attempts=1, repeat_safe=False,
        reconciler=_answer, registry=reg)(lambda ctx, payload: None)
    job("crm.sync", queue="crm", lease=LEASE, max_attempts=1, registry=reg)(
        lambda ctx, payload: None)
    with psycopg.connect(clean_db) as conn:
        for job_type, outcome, status, code, said, n in PLAN:
            for _ in range(n):
                enqueue(conn, job_type, {"reconciler": said}, registry=reg)
            conn.commit()
            claimed = claim(conn, types=[job_type], leases=[LEASE], queues=None, limit=n,
                            worker_id=WORKER)
            conn.commit()
            assert len(claimed) == n
            write_batch(conn, [Completion(
                job_id=j.id, execution_id=j.execution_id, type=j.type, attempt=j.attempt,
                lease=LEASE, status=status, outcome=outcome, error_code=code,
                error=f"{code or outcome.value} (seeded)", queue=j.queue) for j in claimed])
            conn.commit()
        reconcile(conn, reg, actor="figures", role="operator")
        conn.commit()
        # Could not tell, then an operator retried it: it ran and is unknown again, asked
        # by nobody since (its verdict of the earlier outcome is cleared).
        again = conn.execute("SELECT id FROM background_jobs WHERE reconcile_verdict = "
                             "'unknown' ORDER BY id LIMIT 1").fetchone()[0]
        assert retry_job(conn, again, actor="ann", role="operator", reason="figures").ok
        conn.commit()
        # It runs again with the two the reconciler retried (not done): they complete.
        claimed = claim(conn, types=["pay.charge"], leases=[LEASE], queues=None, limit=5,
                        worker_id=WORKER)
        conn.commit()
        assert len(claimed) == 3 and again in {j.id for j in claimed}
        write_batch(conn, [Completion(
            job_id=j.id, execution_id=j.execution_id, type=j.type, attempt=j.attempt,
            lease=LEASE, status=S.UNKNOWN if j.id == again else S.COMPLETED,
            outcome=O.UNKNOWN if j.id == again else O.COMPLETED,
            error_code="GATEWAY_TIMEOUT" if j.id == again else None, error="again (seeded)",
            queue=j.queue) for j in claimed])
        conn.commit()
    return clean_db


def expected_groups(url: str) -> dict[int, dict]:
    """Every group of unknown jobs, by its newest job's id, counted here from the rows."""
    with psycopg.connect(url) as conn:
        jobs = conn.execute("SELECT id, status, type, last_error_code, reconcile_verdict "
                            "FROM background_jobs").fetchall()
    members: dict[tuple, list[int]] = {}
    for job_id, status, job_type, code, verdict in jobs:
        if status == "unknown":
            members.setdefault((job_type, code, verdict), []).append(job_id)
    return {max(ids): {"type": key[0], "code": key[1], "verdict": VERDICTS[key[2]],
                       "ids": sorted(ids, reverse=True)} for key, ids in members.items()}


def test_every_group_is_counted_as_the_rows_say(unknowns, operator):
    expected = expected_groups(unknowns)
    # the boundaries are all there: 3 verdicts, a code in two types, no code
    assert Counter(g["verdict"] for g in expected.values()) == Counter(
        {"no verdict": 4, "could not tell": 2, "reconciler failed": 1})
    root = page(operator, "/review")
    shown = {}
    for row in root.having("data-group-of"):
        code = row.one("group-code").text()
        shown[int(row["data-group-of"])] = {
            "type": row.one("group-type").text(),
            "code": None if code == "(no code)" else code,
            "verdict": row.one("group-verdict").text(),
            "jobs": int(row.one("group-jobs").text()),
            "buttons": {int(re.search(r"(\d+)…", b.text()).group(1))
                        for b in row.all(lambda e: e.tag == "button")}}
    assert set(shown) == set(expected)
    for newest, group in expected.items():
        got = shown[newest]
        assert (got["type"], got["code"], got["verdict"]) == (
            group["type"], group["code"], group["verdict"]), newest
        assert got["jobs"] == len(group["ids"]) and got["buttons"] == {got["jobs"]}, newest
        # its cards: exactly its jobs, newest first
        cards = page(operator, f"/review?of={newest}&limit=200").having("data-job-id")
        assert [int(c["data-job-id"]) for c in cards] == group["ids"], newest
        # named by any of its jobs, the same group
        oldest = group["ids"][-1]
        cards = page(operator, f"/review?of={oldest}&limit=200").having("data-job-id")
        assert [int(c["data-job-id"]) for c in cards] == group["ids"], oldest


def test_a_groups_decision_stores_exactly_its_jobs(unknowns, operator):
    expected = expected_groups(unknowns)
    for newest, group in expected.items():
        response = post_form(operator, "/review/group",
                             {"of": str(newest), "action": "mark_failed"},
                             token_from="/review")
        assert response.status_code == 303, newest
        review = page(operator, response.headers["Location"])
        assert int(review.one("selected-count").text()) == len(group["ids"]), newest
        selection = response.headers["Location"].split("/bulk/")[1].split("?")[0]
        with psycopg.connect(unknowns) as conn:
            held = conn.execute("SELECT array_agg(u ORDER BY u DESC) FROM "
                                "console_selection_jobs p, unnest(p.job_ids) u "
                                "WHERE p.selection_id = %s", [selection]).fetchone()[0]
        assert held == group["ids"], newest
