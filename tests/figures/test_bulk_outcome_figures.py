"""A bulk retry's outcome on its page against independent counts: the canary's failures by
error code while the operator decides, and once done how the whole set ended, by status
and by error code, the canary beside the rest.

The group's jobs are known to the test (newest first, as the action takes them), so the
canary is the first N of them here, never the page's ordinals; "changed by the action" is
read from `job_audit`, the state from `background_jobs`.
"""

from __future__ import annotations

import psycopg

from tests.figures.conftest import rows
from tests.figures.html_tree import Element, page
from tests.integration.test_bulk_canary_steer import end_jobs
from tests.integration.test_bulk_chunks import drive, post, seed, select_group

CANARY = 100


def real(url: str, sel: str, canary: list[int]) -> dict[tuple, tuple[int, int, int]]:
    """{(status, code or '' / None for the status's own row): (canary, rest, whole)} over
    the jobs the action changed."""
    found = rows(url, """
        SELECT j.status, j.last_error_code, j.id = ANY(%s)
        FROM background_jobs j
        WHERE j.id IN (SELECT job_id FROM job_audit WHERE bulk_id = %s)""", [canary, sel])
    out: dict[tuple, list[int]] = {}
    for status, code, in_canary in found:
        keys = [(status, None)]
        if status in ("failed", "unknown"):
            keys.append((status, code or ""))
        for key in keys:
            counts = out.setdefault(key, [0, 0, 0])
            counts[0 if in_canary else 1] += 1
            counts[2] += 1
    return {k: tuple(v) for k, v in out.items()}


def shown(doc: Element) -> dict[tuple, tuple[int, int, int]]:
    table = doc.one("set-outcome")
    return {(tr["data-outcome-status"], tr.attrs.get("data-outcome-code")):
            (int(tr.one("outcome-canary").text()), int(tr.one("outcome-rest").text()),
             int(tr.one("outcome-whole").text()))
            for tr in table.having("data-outcome-status")}


def test_a_retry_shows_its_canarys_failures_then_how_the_whole_set_ended(
        operator, post_form, clean_db):
    group = seed(clean_db, 3000)
    sel = select_group(operator, post_form)
    post(operator, f"/bulk/{sel}", {"reason": "token renewed", "request_id": "c1",
                                    "mode": "canary", "canary": str(CANARY)})
    canary = group[:CANARY]
    end_jobs(clean_db, canary[:60], "completed")
    end_jobs(clean_db, canary[60:90], "failed", "TOKEN_REVOKED")
    end_jobs(clean_db, canary[90:], "failed", "AUTH_FAILED")

    # While deciding: the canary's failures by code, against the tables.
    doc = page(operator, f"/bulk/{sel}")
    warning = doc.one("canary-failed-warning")
    by_code = dict(rows(clean_db, """
        SELECT last_error_code, count(*) FROM background_jobs
        WHERE status = 'failed' AND id = ANY(%s)
          AND id IN (SELECT job_id FROM job_audit WHERE bulk_id = %s) GROUP BY 1""",
                        [canary, sel]))
    assert {tr["data-canary-code"]: int(tr.one("canary-code-jobs").text())
            for tr in warning.having("data-canary-code")} == by_code == {
                "TOKEN_REVOKED": 30, "AUTH_FAILED": 10}
    assert int(warning.one("canary-failed-again").text()) == sum(by_code.values())
    assert doc.maybe("set-outcome") is None  # the whole set only once the action ended

    # One job of the rest moves on before its chunk: left alone, not the action's outcome.
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE background_jobs SET status = 'skipped', skipped_at = now() "
                     "WHERE id = %s", [group[2000]])
    post(operator, f"/bulk/{sel}/continue", {"despite_failed_canary": "1"})
    drive(operator, sel)
    rest = [i for i in group[CANARY:] if i != group[2000]]
    end_jobs(clean_db, rest[:2000], "completed")
    end_jobs(clean_db, rest[2000:2500], "failed", "AUTH_FAILED")
    with psycopg.connect(clean_db) as conn:  # a failure with no code at all
        conn.execute("UPDATE background_jobs SET status = 'failed', failed_at = now(), "
                     "last_error_code = NULL WHERE id = ANY(%s)", [rest[2500:2700]])
    end_jobs(clean_db, rest[2700:2800], "unknown", "AMBIGUOUS")

    doc = page(operator, f"/bulk/{sel}")
    expected = real(clean_db, sel, canary)
    assert shown(doc) == expected
    assert expected[("pending", None)] == (0, 99, 99)  # still to run: the page says so
    assert expected[("failed", "AUTH_FAILED")] == (10, 500, 510)
    assert expected[("failed", "")] == (0, 200, 200)
    assert sum(v[2] for (s, c), v in expected.items() if c is None) == 2999
    section = doc.one("bulk-progress")
    assert section["data-state"] == "done" and section["hx-get"].endswith("/_progress")
    assert doc.one("set-not-ended").text().startswith("99 of them have not ended yet")
    # each code's row links to its failed group (failed) or its jobs (unknown)
    table = doc.one("set-outcome")
    links = {tr.attrs.get("data-outcome-code"): tr.one(lambda e: e.tag == "a")["href"]
             for tr in table.having("data-outcome-code") if tr["data-outcome-code"]}
    assert links == {"AUTH_FAILED": "/failed/group?code=AUTH_FAILED",
                     "TOKEN_REVOKED": "/failed/group?code=TOKEN_REVOKED",
                     "AMBIGUOUS": "/jobs?status=unknown&error_code=AMBIGUOUS"}

    # Once every job has ended the table stops refreshing itself.
    end_jobs(clean_db, rest[2800:], "completed")
    doc = page(operator, f"/bulk/{sel}/_progress")
    assert shown(doc) == real(clean_db, sel, canary)
    assert "hx-get" not in doc.one("bulk-progress").attrs and doc.maybe("set-not-ended") is None
