"""Every figure of the limits tables (Queues page, a job type's page) equals an
independent count over the base tables: executions started in the last 10 seconds,
running jobs, due pending jobs, per limited type and queue; and the limits shown are the
published declaration or the operator's live limit, as stored."""

from __future__ import annotations

import psycopg

from jobwarden import JobSpec, Registry, enqueue_many, job
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.ops.operations import set_limit
from tests.figures.html_tree import parse
from tests.helpers import scalar

TYPES = {"api.call": ("partner", "50/s"), "mail.send": ("email", None)}


def _seed(url: str) -> None:
    reg = Registry()
    for name, (queue, rate) in TYPES.items():
        job(name, queue=queue, rate_limit=rate, registry=reg)(lambda ctx, p: None)
    with psycopg.connect(url) as conn:
        publish_job_types(conn, list(reg), "figures")
        specs = [JobSpec(t, {}, queue=q) for t, (q, _) in TYPES.items() for _ in range(12)]
        specs += [JobSpec("api.call", {}, queue="partner", delay=3600) for _ in range(5)]
        enqueue_many(conn, specs, registry=reg)
        conn.commit()
        # Claimed now: 7 of each type (running, started within the window) ...
        for t in TYPES:
            claim(conn, types=[t], leases=[60.0], queues=None, limit=7, worker_id="fig:1:a")
        conn.commit()
        # ... of which 3 per type started long ago (outside the rate window).
        for t in TYPES:
            conn.execute("""UPDATE background_jobs SET started_at = now() - interval '40 seconds'
                            WHERE id IN (SELECT id FROM background_jobs
                                         WHERE type = %s AND status = 'running'
                                         ORDER BY id LIMIT 3)""", [t])
        set_limit(conn, "queue", "email", actor="ann", role="operator", reason="smtp",
                  max_concurrency=9, rate="120/m")
        set_limit(conn, "type", "api.call", actor="bob", role="admin", reason="partner 429s",
                  rate="20/s", burst=40)
        conn.commit()


def _independent(url: str, column: str, name: str) -> dict[str, int]:
    return {
        # Executions started in the window: ended ones in the history, running ones on
        # their job rows (a running execution has no history row yet).
        "started": scalar(url, f"""
            SELECT (SELECT count(*) FROM job_executions WHERE {column} = %(n)s
                      AND started_at > now() - interval '10 seconds')
                 + (SELECT count(*) FROM background_jobs WHERE {column} = %(n)s
                      AND status = 'running'
                      AND started_at > now() - interval '10 seconds')""", {"n": name}),
        "running": scalar(url, f"SELECT count(*) FROM background_jobs WHERE {column} = %s "
                               "AND status = 'running'", [name]),
        "waiting": scalar(url, f"SELECT count(*) FROM background_jobs WHERE {column} = %s "
                               "AND status = 'pending' AND available_at <= now()", [name]),
    }


def test_the_limits_figures_count_the_base_tables(operator, clean_db):
    _seed(clean_db)
    tree = parse(operator.get("/queues").get_data(as_text=True))
    shown = {r["data-limit"]: r for r in tree.having("data-limit")}
    assert set(shown) == {"queue:email", "type:api.call"}
    for target, column, name in (("queue:email", "queue", "email"),
                                 ("type:api.call", "type", "api.call")):
        row = shown[target]
        expected = _independent(clean_db, column, name)
        assert row.one("limit-current").text() == f"{expected['started'] / 10:.1f}/s"
        assert int(row.one("limit-running").text()) == expected["running"]
        assert int(row.one("limit-waiting").text()) == expected["waiting"]
    # The numbers are not all alike (a page that showed one figure everywhere would fail).
    assert _independent(clean_db, "type", "api.call") == {"started": 4, "running": 7,
                                                          "waiting": 5}
    # The limits as stored: the live one wins, the declaration is named beside it.
    api = shown["type:api.call"]
    assert api.one("limit-rate").text() == "20/s (burst 40)"
    assert "declared 50/s (burst 50)" in api.one("limit-source").text()
    assert api.one("limit-set-by").text() == "bob"
    email = shown["queue:email"]
    assert email.one("limit-rate").text() == "2/s (burst 2)"
    assert email.one("limit-concurrency").text() == "9"
    # The job type page shows the same row.
    page = parse(operator.get("/types/api.call").get_data(as_text=True))
    row = page.one(lambda e: e.attrs.get("data-limit") == "type:api.call")
    assert int(row.one("limit-waiting").text()) == 5
    assert row.one("limit-rate").text() == "20/s (burst 40)"
