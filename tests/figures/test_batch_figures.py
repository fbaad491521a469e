"""The batches' figures: a batch page's progress by state, its summary, its retry button's
count and its callbacks, and the list's rows — each against an independent count over
the base tables (`background_jobs` grouped by batch_id and status, `job_batch_callbacks`,
`job_batches`' closed_at), computed here, never with the query that drew it.

The dataset (tests/batch_support.py) is written through the runtime's statements and
sits on both sides of each boundary: members of four batches in every state (a pending
one scheduled later, a waiting one, a running one), a closed batch with every member
final and one closed empty, an open one; failed, pending and completed jobs in no batch
of the same types; callback jobs, which are no member of their batch.
"""

from __future__ import annotations

from collections import defaultdict

import psycopg
import pytest

from jobwarden.console.data.batches import PROGRESS_STATES
from jobwarden.worker.duties.batches import repair
from jobwarden.worker.ops.operations import cancel_job, retry_job
from tests.batch_support import Seeded, seed_batches
from tests.figures.html_tree import Element, page

FINAL = ("completed", "failed", "cancelled", "skipped")


@pytest.fixture
def batches(clean_db) -> Seeded:
    return seed_batches(clean_db)


class Tables:
    """The base tables as plain rows, and every figure worked out from them here."""

    def __init__(self, url: str) -> None:
        with psycopg.connect(url) as conn:
            self.statuses = defaultdict(dict)
            for batch_id, status, n in conn.execute(
                    "SELECT batch_id, status, count(*) FROM background_jobs "
                    "WHERE batch_id IS NOT NULL GROUP BY batch_id, status"):
                self.statuses[batch_id][status] = n
            self.batches = {r[0]: {"owner": r[1], "closed": r[2]} for r in conn.execute(
                "SELECT id, owner, closed_at IS NOT NULL FROM job_batches")}
            self.callbacks = defaultdict(dict)
            for batch_id, event, job_id, status in conn.execute(
                    "SELECT k.batch_id, k.event, k.job_id, j.status FROM job_batch_callbacks k "
                    "LEFT JOIN background_jobs j ON j.id = k.job_id"):
                self.callbacks[batch_id][event] = (job_id, status)
            self.member_ids = defaultdict(set)
            for job_id, batch_id in conn.execute(
                    "SELECT id, batch_id FROM background_jobs WHERE batch_id IS NOT NULL"):
                self.member_ids[batch_id].add(job_id)

    def progress(self, batch_id: int) -> dict[str, int]:
        counted = dict.fromkeys(PROGRESS_STATES, 0)
        for status, n in self.statuses[batch_id].items():
            counted[status if status in counted else "unfinished"] += n
        return {**counted, "members": sum(self.statuses[batch_id].values())}

    def all_final(self, batch_id: int) -> bool:
        return self.batches[batch_id]["closed"] and all(
            s in FINAL for s in self.statuses[batch_id])


def shown_counts(root: Element, testid: str = "batch-counts") -> dict[str, int]:
    table = root.one(testid)
    return {e["data-state"]: int(e.text()) for e in table.having("data-state")}


def check_batch_page(viewer, tables: Tables, batch_id: int) -> None:
    root = page(viewer, f"/batches/{batch_id}")
    expected = tables.progress(batch_id)
    assert shown_counts(root) == expected, batch_id
    assert int(root.one("batch-members").text()) == expected["members"]
    assert int(root.one("batch-final").text()) == sum(expected[s] for s in FINAL)
    # The bar draws a segment for exactly the states that hold members, named with them.
    segments = {e.attrs["class"].split()[1].removeprefix("batch-"): e.one(
        lambda t: t.tag == "title").text() for e in root.one("batch-bar").all(
        lambda e: e.tag == "rect" and "batch-seg" in e.attrs.get("class", ""))}
    assert segments == {s: f"{n} {s}" for s in PROGRESS_STATES if (n := expected[s])}
    # Callbacks: each one's job as job_batch_callbacks names it, with its status now.
    for row in root.having("data-event"):
        job_id, status = tables.callbacks[batch_id][row["data-event"]]
        cell = row.one("callback-job")
        if job_id is None:
            assert cell.text() == "—" and "not yet" in row.one("callback-due").text()
        else:
            assert cell.one(lambda e: e.tag == "a")["href"] == f"/jobs/{job_id}"
            assert cell.one(lambda e: "data-status" in e.attrs)["data-status"] == status
            assert row.one("callback-due").time() is not None
    assert {r["data-event"] for r in root.having("data-event")} == set(tables.callbacks[batch_id])
    # on_complete's moment (sealed) exactly when every member of a closed batch is final.
    assert (root.one("batch-sealed").time() is not None) == tables.all_final(batch_id)


def test_every_batch_pages_figures(viewer, batches):
    tables = Tables(batches.url)
    for batch_id in batches.batch.values():
        check_batch_page(viewer, tables, batch_id)


def test_the_retry_buttons_count_is_the_batchs_failed_members(operator, batches):
    tables = Tables(batches.url)
    for name, batch_id in batches.batch.items():
        root = page(operator, f"/batches/{batch_id}")
        button = root.maybe("batch-retry")
        failed = tables.statuses[batch_id].get("failed", 0)
        if failed:
            assert button.text() == f"Retry the {failed} failed member(s)…", name
        else:
            assert button is None, name
        not_run = sum(tables.statuses[batch_id].get(s, 0) for s in ("pending", "waiting",
                                                                     "running"))
        assert (root.maybe("batch-cancel") is not None) == bool(not_run), name


def test_the_list_rows_and_the_owner_filter(viewer, batches):
    tables = Tables(batches.url)
    root = page(viewer, "/batches")
    rows = root.having("data-batch-id")
    assert [int(r["data-batch-id"]) for r in rows] == sorted(tables.batches, reverse=True)
    for row in rows:
        batch_id = int(row["data-batch-id"])
        shown = {e["data-state"]: int(e.text()) for e in row.having("data-state")}
        assert shown == tables.progress(batch_id), batch_id
    for owner in ("import:42", "import:43"):
        listed = page(viewer, f"/batches?owner={owner}").having("data-batch-id")
        assert {int(r["data-batch-id"]) for r in listed} == {
            i for i, b in tables.batches.items() if b["owner"] == owner}


def test_the_batch_filter_lists_exactly_the_members(viewer, batches):
    tables = Tables(batches.url)
    for batch_id in batches.batch.values():
        listed = page(viewer, f"/jobs?batch={batch_id}&limit=200").having("data-job-id")
        assert {int(r["data-job-id"]) for r in listed} == tables.member_ids[batch_id]


def test_the_figures_follow_an_operators_retry_and_cancel(viewer, batches):
    a = batches.batch["a"]
    who = {"actor": "ann", "role": "operator", "reason": "figures tier"}
    with psycopg.connect(batches.url) as conn:
        assert retry_job(conn, batches.members["a"]["bad"][0], **who).ok
        assert cancel_job(conn, batches.members["a"]["pend"][1], **who).ok
        conn.commit()
    tables = Tables(batches.url)
    check_batch_page(viewer, tables, a)
    assert tables.progress(a)["failed"] == 1 and tables.progress(a)["cancelled"] == 4


def test_a_status_written_by_hand_is_counted_by_the_repair_duty(viewer, batches):
    """The page shows the runtime's counts: a status no statement of the runtime wrote
    (a runtime from before batches) shows once the repair duty has counted it."""
    b = batches.batch["b"]
    with psycopg.connect(batches.url) as conn:
        conn.execute("UPDATE background_jobs SET status = 'skipped' WHERE id = %s",
                     [batches.members["b"]["bad"][0]])
        conn.commit()
        assert shown_counts(page(viewer, f"/batches/{b}"))["failed"] == 1  # not counted yet
        assert repair(conn) == 1
    check_batch_page(viewer, Tables(batches.url), b)


def test_the_dataset_sits_on_both_sides_of_each_boundary(batches):
    """Guards the dataset itself: without these cases the figures above prove little."""
    tables = Tables(batches.url)
    a, b, c, d = (batches.batch[k] for k in "abcd")
    assert set(tables.statuses[a]) == {"completed", "failed", "unknown", "skipped",
                                       "cancelled", "running", "pending", "waiting"}
    progress = tables.progress(a)
    assert len(set(progress.values())) == len(progress)  # a count misplaced shows
    assert tables.all_final(b) and not tables.all_final(a) and tables.all_final(c)
    assert not tables.batches[d]["closed"] and tables.statuses[d] == {"pending": 1}
    assert tables.callbacks[a]["failure"][0] and not tables.callbacks[a]["complete"][0]
    with psycopg.connect(batches.url) as conn:
        outside = dict(conn.execute("SELECT status, count(*) FROM background_jobs "
                                    "WHERE batch_id IS NULL AND type <> 'imp.report' "
                                    "GROUP BY status").fetchall())
        callbacks_in_a_batch = conn.execute(
            "SELECT count(*) FROM job_batch_callbacks k JOIN background_jobs j "
            "ON j.id = k.job_id WHERE j.batch_id IS NOT NULL").fetchone()[0]
        scheduled = conn.execute("SELECT count(*) FROM background_jobs WHERE batch_id = %s "
                                 "AND status = 'pending' AND available_at > now()",
                                 [a]).fetchone()[0]
    assert outside == {"completed": 1, "failed": 1, "pending": 1}
    assert callbacks_in_a_batch == 0 and scheduled == 1
