"""The flows' figures: a flow page's counts by status and what holds it, the overview's
waiting tile and its held note, the cancel and skip forms' dependents preview, and the
held-flow metrics and alert — each against an independent count over the base tables
(`background_jobs`, `job_dependencies`), computed here in Python, never with the query
that drew it.

The dataset is written through the runtime's statements (enqueue_many with `after`, the
finish statement, the operators' actions) and sits on both sides of each boundary: a
waiting job held by a failed, an unknown, an operator-cancelled and an operator-skipped
parent, and one waiting on a parent still pending (not held); a run_anyway edge a failed
parent released (not held) and one an unknown parent holds; a sibling reached up and down
through a shared parent; held past its type's SLA and within it.
"""

from __future__ import annotations

import re
from collections import defaultdict

import psycopg
import pytest

from jobwarden import At, Dep, JobSpec, Registry, enqueue_many, job
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.ops.operations import cancel_job, skip_job
from jobwarden.worker.store.schema import JOB_STATUSES
from tests.figures.conftest import LEASE, WORKER

#: Each job's own type, so a claim of that type takes exactly it; SLA targets by type.
SLA = {"imp.mail": 300, "imp.audit": 3600}
HOLDING = ("failed", "cancelled", "skipped")


def registry() -> Registry:
    reg = Registry()
    for name in ("imp.split", "imp.row_ok", "imp.row_bad", "imp.row_lost", "imp.mail",
                 "imp.cleanup", "imp.audit", "imp.report", "b.root", "b.step", "b.tail",
                 "c.parent", "c.child", "lone"):
        job(name, queue="imports", lease=LEASE, max_attempts=1, sla=SLA.get(name),
            registry=reg)(lambda ctx, payload: None)
    return reg


def finish(conn, job_type: str, status: S, outcome: O, code: str | None = None) -> None:
    """Run every pending job of `job_type` to `status` through claim and the finish
    statement (which releases their dependents)."""
    jobs = claim(conn, types=[job_type], leases=[LEASE], queues=None, limit=100,
                 worker_id=WORKER)
    conn.commit()
    assert jobs, job_type
    write_batch(conn, [Completion(job_id=j.id, execution_id=j.execution_id, type=j.type,
                                  attempt=j.attempt, lease=LEASE, status=status,
                                  outcome=outcome, error_code=code, error=code, queue=j.queue)
                       for j in jobs])
    conn.commit()


@pytest.fixture
def flows_seeded(clean_db):
    reg = registry()
    who = {"actor": "ann", "role": "operator", "reason": "figures tier"}
    with psycopg.connect(clean_db) as conn:
        publish_job_types(conn, list(reg), "figures")
        a = enqueue_many(conn, [
            JobSpec("imp.split", {}),                                         # 0
            JobSpec("imp.row_ok", {"n": 0}, after=[At(0)]),                   # 1
            JobSpec("imp.row_ok", {"n": 1}, after=[At(0)]),                   # 2
            JobSpec("imp.row_bad", {"n": 2}, after=[At(0)]),                  # 3
            JobSpec("imp.row_lost", {"n": 3}, after=[At(0)]),                 # 4
            JobSpec("imp.mail", {}, after=[At(1), At(2), At(3), At(4)]),      # 5
            JobSpec("imp.cleanup", {}, after=[Dep(At(3), run_anyway=True)]),  # 6
            JobSpec("imp.audit", {}, after=[Dep(At(4), run_anyway=True)]),    # 7
            JobSpec("imp.report", {}, after=[At(5)]),                         # 8
        ], registry=reg)
        b = enqueue_many(conn, [
            JobSpec("b.root", {}),                                            # 0
            JobSpec("b.step", {}, after=[At(0)]),                             # 1
            JobSpec("b.step", {}, after=[At(1)]),                             # 2
            JobSpec("b.tail", {}, after=[Dep(At(0), run_anyway=True)]),       # 3
            JobSpec("b.tail", {}, after=[At(1), At(0)]),                      # 4
        ], registry=reg)
        c = enqueue_many(conn, [
            JobSpec("c.parent", {}),                                          # 0
            JobSpec("c.child", {}, after=[At(0)]),                            # 1
            JobSpec("c.parent", {}),                                          # 2
            JobSpec("c.child", {}, after=[At(2)]),                            # 3
            JobSpec("lone", {}),                                              # 4
        ], registry=reg)
        conn.commit()
        finish(conn, "imp.split", S.COMPLETED, O.COMPLETED)
        finish(conn, "imp.row_ok", S.COMPLETED, O.COMPLETED)
        finish(conn, "imp.row_bad", S.FAILED, O.FAILED, "ROW_INVALID")
        finish(conn, "imp.row_lost", S.UNKNOWN, O.UNKNOWN, "AMBIGUOUS")
        assert cancel_job(conn, c[0], dependents="hold", **who).ok
        assert skip_job(conn, c[2], dependents="hold", **who).ok
        conn.commit()
        # The import began an hour ago and its bad row failed 10 minutes ago: imp.mail
        # (SLA 300 s) is held past its target; imp.audit, held by the unknown row since
        # its last heartbeat (seconds ago), is within its 3600 s.
        conn.execute("UPDATE background_jobs SET created_at = now() - interval '1 hour' "
                     "WHERE id = ANY(%s)", [a])
        conn.execute("UPDATE background_jobs SET failed_at = now() - interval '10 minutes' "
                     "WHERE id = %s", [a[3]])
        conn.commit()
    return {"url": clean_db, "a": a, "b": b, "c": c}


# -- the independent count ----------------------------------------------------------------

class Tables:
    """The base tables as plain rows, and every figure worked out from them here."""

    def __init__(self, url: str) -> None:
        with psycopg.connect(url) as conn:
            self.jobs = {r[0]: {"type": r[1], "status": r[2]} for r in conn.execute(
                "SELECT id, type, status FROM background_jobs")}
            self.edges = conn.execute("SELECT job_id, parent_id, run_anyway, "
                                      "released_at IS NOT NULL FROM job_dependencies"
                                      ).fetchall()

    def flow(self, start: int) -> set[int]:
        near = defaultdict(set)
        for child, parent, _anyway, _released in self.edges:
            near[child].add(parent)
            near[parent].add(child)
        seen, todo = {start}, [start]
        while todo:
            for other in near[todo.pop()] - seen:
                seen.add(other)
                todo.append(other)
        return seen

    def held(self, within: set[int] | None = None) -> set[tuple[int, int]]:
        return {(child, parent) for child, parent, anyway, released in self.edges
                if not released and self.jobs[child]["status"] == "waiting"
                and (within is None or child in within)
                and (self.jobs[parent]["status"] == "unknown"
                     or (not anyway and self.jobs[parent]["status"] in HOLDING))}

    def preview(self, acted: set[int]) -> dict[str, int]:
        waiting = {j for j, r in self.jobs.items() if r["status"] == "waiting"} - acted
        open_edges = [(c, p, anyway) for c, p, anyway, released in self.edges if not released]
        direct = {c for c, p, _a in open_edges if p in acted and c in waiting}
        held = {c for c, p, anyway in open_edges if p in acted and not anyway and c in waiting}
        start = {c for c in direct
                 if all(p in acted for c2, p, _a in open_edges if c2 == c)}
        below, todo = set(), list(acted)
        while todo:
            parent = todo.pop()
            for c, p, anyway in open_edges:
                if p == parent and not anyway and c not in below:
                    below.add(c)
                    todo.append(c)
        return {"hold": len(held), "cancel": len(below & waiting), "release": len(direct),
                "start": len(start)}


def counts_shown(html: str) -> dict[str, int]:
    table = re.search(r'data-testid="flow-counts">(.*?)</table>', html, re.S).group(1)
    return {s: int(n) for s, n in
            re.findall(r'data-status="(\w+)">(?:<a [^>]*>)?(\d+)', table)}


# -- the figures ----------------------------------------------------------------------------

@pytest.mark.parametrize("flow, start", [("a", 8), ("a", 6), ("b", 3), ("c", 1), ("c", 4)])
def test_a_flow_pages_counts_and_held_list(viewer, flows_seeded, flow, start):
    job_id = flows_seeded[flow][start]
    tables = Tables(flows_seeded["url"])
    members = tables.flow(job_id)
    html = viewer.get(f"/flows/{job_id}").get_data(as_text=True)
    expected = dict.fromkeys(JOB_STATUSES, 0)
    for m in members:
        expected[tables.jobs[m]["status"]] += 1
    assert counts_shown(html) == {**expected, "total": len(members)}
    shown = {(int(a), int(b)) for a, b in re.findall(r'data-held="(\d+)" data-parent="(\d+)"',
                                                     html)}
    assert shown == tables.held(members)
    if shown:
        assert re.search(r'data-testid="flow-held-count">(\d+)<', html).group(1) == \
            str(len(shown))
    # Every job walked is drawn: the boxes' counts add up to the flow (one box a job here).
    boxes = re.findall(r'class="flow-box flow-(\w+)', html)
    assert len(boxes) == len(members)


def test_the_dataset_sits_on_both_sides_of_each_boundary(flows_seeded):
    """Guards the dataset itself: without these cases the figures above prove little."""
    a, b, c = flows_seeded["a"], flows_seeded["b"], flows_seeded["c"]
    tables = Tables(flows_seeded["url"])
    held = tables.held()
    assert (a[5], a[3]) in held and (a[5], a[4]) in held  # failed and unknown parents
    assert (a[7], a[4]) in held  # run_anyway, but its parent is unknown
    assert tables.jobs[a[6]]["status"] == "pending"  # run_anyway released by a failure
    assert tables.jobs[a[8]]["status"] == "waiting" and not any(h[0] == a[8] for h in held)
    assert (c[1], c[0]) in held and (c[3], c[2]) in held  # cancelled, skipped by an operator
    assert not any(h[0] in b for h in held)  # waits on a pending parent: not held
    assert tables.flow(b[3]) == set(b)  # reached through the shared root, both ways
    assert tables.flow(c[1]) == {c[0], c[1]}


def test_the_overview_counts_waiting_jobs_and_the_held_ones(viewer, flows_seeded):
    tables = Tables(flows_seeded["url"])
    html = viewer.get("/").get_data(as_text=True)
    tile = re.search(r'data-testid="count-waiting">(.*?)</a>', html, re.S).group(1)
    waiting = sum(r["status"] == "waiting" for r in tables.jobs.values())
    assert re.search(r'data-count="(\d+)"', tile).group(1) == str(waiting)
    held_jobs = {child for child, _parent in tables.held()}
    assert re.search(r'data-testid="held-waiting">(\d+)<', tile).group(1) == str(len(held_jobs))
    assert 0 < len(held_jobs) < waiting


@pytest.mark.parametrize("flow, start", [("b", 0), ("b", 1), ("a", 5), ("a", 0)])
def test_the_dependents_preview_of_a_job(operator, flows_seeded, flow, start):
    job_id = flows_seeded[flow][start]
    tables = Tables(flows_seeded["url"])
    html = operator.get(f"/jobs/{job_id}").get_data(as_text=True)
    status = tables.jobs[job_id]["status"]
    for action, allowed in (("cancel", ("pending", "waiting")),
                            ("skip", ("pending", "waiting", "failed", "unknown"))):
        form = re.search(rf'data-action="{action}"(.*?)</form>', html, re.S)
        expected = tables.preview({job_id}) if status in allowed else None
        if expected is None or not expected["release"]:
            assert form is None or "dependents-choice" not in form.group(1), action
            continue
        shown = {k: int(v) for k, v in re.findall(r'data-testid="preview-(\w+)">(\d+)<',
                                                  form.group(1))}
        assert shown == expected, action


def test_the_dependents_preview_of_a_bulk_selection(operator, post_form, flows_seeded):
    b = flows_seeded["b"]
    picked = {b[0], b[2]}  # the root and a step two levels down: overlapping reaches
    response = post_form(operator, "/bulk/select",
                         {"action": "skip", "job_id": [str(i) for i in picked]})
    html = operator.get(response.headers["Location"]).get_data(as_text=True)
    shown = {k: int(v) for k, v in re.findall(r'data-testid="preview-(\w+)">(\d+)<', html)}
    assert shown == Tables(flows_seeded["url"]).preview(picked)


def test_the_held_metrics_by_type(viewer, flows_seeded):
    tables = Tables(flows_seeded["url"])
    held_by_type: dict[str, int] = defaultdict(int)
    for child in {c for c, _p in tables.held()}:
        held_by_type[tables.jobs[child]["type"]] += 1
    text = viewer.get("/metrics").get_data(as_text=True)
    shown = {t: float(v) for t, v in re.findall(
        r'^jobwarden_flow_held_jobs\{type="([^"]+)"\} (\S+)$', text, re.M)}
    types = {r["type"] for r in tables.jobs.values()}
    assert shown == {t: float(held_by_type.get(t, 0)) for t in types}


def test_the_alerts_panel_fires_for_a_hold_past_its_types_sla_only(viewer, flows_seeded):
    html = viewer.get("/_overview/alerts").get_data(as_text=True)
    row = re.search(r'data-alert="JobwardenFlowHeldOverSLA"(.*?)</tr>', html, re.S).group(1)
    assert "FIRING" in row
    # imp.mail: held 10 minutes, SLA 300 s; imp.audit: held by the unknown row for
    # seconds, SLA 3600 s; c.child: held without a target.
    assert "imp.mail held" in row and "imp.audit" not in row and "c.child" not in row
    assert f'href="/flows/{flows_seeded["a"][5]}"' in row
