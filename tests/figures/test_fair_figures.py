"""Every figure of a fair-keyed type's page (per key: backlog, due, oldest wait, the
starved flag) equals an independent count over background_jobs, grouped by the payload's
own value rather than the stored fair_key column."""

from __future__ import annotations

import psycopg

from jobwarden import JobSpec, Registry, enqueue_many, job
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.jobs.job_types import publish_job_types
from tests.figures.html_tree import parse
from tests.helpers import scalar

HOSTILE = "<b>x</b>&\"'"


def _seed(url: str) -> None:
    reg = Registry()
    job("tenant.sync", fair_key="tenant", sla="30s", fair_weights={"acme": 2},
        registry=reg)(lambda ctx, p: None)
    with psycopg.connect(url) as conn:
        publish_job_types(conn, list(reg), "figures")
        specs = [JobSpec("tenant.sync", {"tenant": "acme", "n": i}) for i in range(9)]
        specs += [JobSpec("tenant.sync", {"tenant": "acme", "n": i}, delay=3600)
                  for i in range(2)]
        specs += [JobSpec("tenant.sync", {"tenant": "beta", "n": i}) for i in range(3)]
        specs += [JobSpec("tenant.sync", {"tenant": HOSTILE}),
                  JobSpec("tenant.sync", {"no_tenant": 1})]
        enqueue_many(conn, specs, registry=reg)
        conn.commit()
        # 4 of acme's run now (not pending any more); beta's have waited 2 minutes.
        claim(conn, types=["tenant.sync"], leases=[60.0], queues=None, limit=4,
              worker_id="fig:1:a")
        conn.execute("UPDATE background_jobs SET available_at = now() - interval '2 minutes'"
                     " WHERE payload ->> 'tenant' = 'beta'")
        conn.commit()


def _independent(url: str) -> dict[str, tuple[int, int, float | None]]:
    rows = psycopg.connect(url).execute("""
        SELECT coalesce(payload ->> 'tenant', ''), count(*),
               count(*) FILTER (WHERE available_at <= now()),
               extract(epoch FROM now() - min(available_at)
                       FILTER (WHERE available_at <= now()))::float8
        FROM background_jobs WHERE type = 'tenant.sync' AND status = 'pending'
        GROUP BY 1""").fetchall()
    return {key: (backlog, due, wait) for key, backlog, due, wait in rows}


def test_the_fair_key_figures_count_the_base_tables(operator, clean_db):
    _seed(clean_db)
    page = parse(operator.get("/types/tenant.sync").get_data(as_text=True))
    shown = {r["data-fair-key"]: r for r in page.having("data-fair-key")}
    expected = _independent(clean_db)
    assert set(shown) == set(expected) == {"acme", "beta", HOSTILE, ""}
    for key, (backlog, due, wait) in expected.items():
        row = shown[key]
        assert int(row.one("fair-backlog").text()) == backlog
        assert int(row.one("fair-due").text()) == due
        assert abs(float(row.one("fair-oldest")["data-seconds"]) - wait) <= 2
    # The figures are not all alike: acme's backlog is 7 (5 due), beta's 3.
    assert expected["acme"][:2] == (7, 5) and expected["beta"][:2] == (3, 3)
    # Starved: only the key whose oldest due job waited longer than the 30 s SLA.
    starved = {k for k, r in shown.items() if r.all("fair-starved")}
    assert starved == {k for k, (_, _, w) in expected.items() if w is not None and w > 30}
    assert starved == {"beta"}
    assert "acme" in page.one("fair-weights").text()
    # The hostile key is text on the page, never markup.
    assert not page.all(lambda e: e.tag == "b")
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs "
                            "WHERE fair_key IS NULL") == 0
