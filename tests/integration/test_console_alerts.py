"""The overview's Alerts panel: each condition of the Prometheus rules, firing or ok."""

from __future__ import annotations

import re

import psycopg
import pytest

from jobwarden.console.data import sample_data
from tests.helpers import wait_for


def states(html: str) -> dict[str, str]:
    rows = re.findall(r'data-alert="(\w+)".*?data-testid="alert-state">(\w+)<', html, re.S)
    return dict(rows)


@pytest.fixture
def healthy(engine):
    with engine.begin() as conn:
        sample_data.insert_worker(conn, "w-1", queues=("*",))
        for _ in range(25):
            job = sample_data.insert_job(conn, "send_email", "completed", queue="email")
            sample_data.insert_execution(conn, job, started_ago=60)
        sample_data.insert_job(conn, "send_email", "pending", queue="email", ago=2)


@pytest.fixture
def incident(engine):
    with engine.begin() as conn:
        sample_data.insert_worker(conn, "w-email", queues=("email",))
        for n in range(20):  # 5 of 20 fail: 25% over the 10% threshold
            job = sample_data.insert_job(conn, "send_email", "completed", queue="email")
            sample_data.insert_execution(conn, job, started_ago=60, outcome="failed" if n < 5
                                         else "completed", error_code="AUTH_FAILED" if n < 5
                                         else None)
        for _ in range(60):  # reports: a deep queue nobody serves, over its SLA
            sample_data.insert_job(conn, "export_report", "pending", queue="reports", ago=300)
        sample_data.insert_job(conn, "send_email", "running", queue="email",
                               heartbeat_at=conn.exec_driver_sql(
                                   "SELECT now() - interval '10 minutes'").scalar_one())
        conn.exec_driver_sql("INSERT INTO job_types (type, queue, max_attempts, lease_seconds, "
                             "backoff, sla_seconds, version, repeat_safe, published_by) VALUES "
                             "('export_report', 'reports', 5, 60, '{}', 120, 1, true, 'w')")
        for hours_ago in (24.5, 168.5):  # 100 completions in the same hour a day and a week ago
            job = sample_data.insert_job(conn, "send_email", "completed", queue="email")
            for attempt in range(100):
                sample_data.insert_execution(conn, job, attempt=attempt + 1,
                                             started_ago=hours_ago * 3600)


def test_a_healthy_system_shows_every_alert_ok(viewer, healthy):
    assert 'hx-get="/_overview/alerts"' in viewer.get("/").get_data(as_text=True)
    found = states(viewer.get("/_overview/alerts").get_data(as_text=True))
    assert len(found) == 10 and set(found.values()) == {"ok"}


def test_an_incident_fires_each_condition_it_meets(viewer, incident):
    html = viewer.get("/_overview/alerts").get_data(as_text=True)
    assert states(html) == {
        "JobwardenFailedRateHigh": "FIRING", "JobwardenRetryStorm": "ok",
        "JobwardenPendingOverSLA": "FIRING",
        "JobwardenStaleHeartbeats": "FIRING", "JobwardenNoLiveWorker": "FIRING",
        "JobwardenQueueGrowing": "FIRING", "JobwardenCompletionsDropped": "FIRING",
        "JobwardenXminHorizonHeld": "ok", "JobwardenDeadTuplesPiling": "ok",
        "JobwardenFlowHeldOverSLA": "ok"}
    assert "send_email 25% of 20 (AUTH_FAILED 5)" in html and "no live worker for reports" in html
    assert "reports (+60 in 15 min, 60 waiting)" in html  # email: 20 started, 0 arrived
    assert "15 in the last hour, usually 100" in html


def live_panel(html: str) -> dict[str, set[str]]:
    """The overview's Live workers table: worker id -> the queues it lists."""
    table = re.search(r'data-testid="live-workers">(.*?)</table>', html, re.S)
    rows = re.findall(r'data-worker="([^"]+)" data-queues="([^"]*)"', table.group(1) if table else "")
    return {worker: set(queues.split(",")) for worker, queues in rows}


def unserved(viewer) -> set[str]:
    html = viewer.get("/_overview/alerts").get_data(as_text=True)
    detail = re.search(r'data-alert="JobwardenNoLiveWorker".*?no live worker for ([^<]+)<', html, re.S)
    return set(detail.group(1).split(", ")) if detail else set()


@pytest.mark.parametrize("extra_worker", [None, ("w-all", ("*",), "running")])
def test_the_alert_and_the_live_workers_panel_agree(viewer, engine, clean_db, extra_worker):
    """The demo's data: `reports` is served only by a draining worker, which claims no new
    jobs. The alert fires for exactly the queues with runnable jobs that no worker in the
    Live workers panel serves; a worker on every queue (`*`) serves them all."""
    with engine.begin() as conn:
        sample_data.seed_console_scenario(conn)
        if extra_worker:
            worker_id, queues, state = extra_worker
            sample_data.insert_worker(conn, worker_id, queues=queues, state=state)
        runnable = {r[0] for r in conn.exec_driver_sql(
            "SELECT DISTINCT queue FROM background_jobs "
            "WHERE status = 'pending' AND available_at <= now()")}
    for path in ("/", "/_overview/health"):  # the page and the panel's own refresh
        health = viewer.get(path).get_data(as_text=True)
        live = live_panel(health)
        served = {q for q in runnable if any("*" in qs or q in qs for qs in live.values())}
        assert unserved(viewer) == runnable - served, path
        assert 'data-testid="draining-workers"' in health and "w-app2-7" not in live, path
        if extra_worker:
            assert live["w-all"] == {"*"} and not unserved(viewer)
        else:
            assert set(live) == {"w-app1-1"} and unserved(viewer) == {"reports"}


def detail(html: str, name: str) -> str:
    return re.search(rf'data-alert="{name}".*?data-testid="alert-detail">([^<]*)<', html, re.S).group(1)


def test_a_snapshot_held_for_less_than_five_minutes_leaves_the_horizon_line_ok(viewer, clean_db):
    with psycopg.connect(clean_db) as holder:
        holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        holder.execute("SELECT 1")
        html = viewer.get("/_overview/alerts").get_data(as_text=True)
    assert states(html)["JobwardenXminHorizonHeld"] == "ok"
    assert detail(html, "JobwardenXminHorizonHeld") == "no transaction has held it over 5m 00s"


def test_a_job_table_with_more_dead_tuples_than_live_fires_with_postgresqls_counts(
        viewer, clean_db):
    with psycopg.connect(clean_db, autocommit=True) as db:
        db.execute("INSERT INTO job_audit (actor, role, action, reason) "
                   "SELECT 'ada', 'admin', 'retry', 'bulk' FROM generate_series(1, 100001)")
        db.execute("DELETE FROM job_audit WHERE id > (SELECT min(id) FROM job_audit)")
        db.execute("SELECT pg_stat_force_next_flush()")
        # statistics arrive asynchronously: wait for this session's deletes to show
        row = wait_for(lambda: r if (r := db.execute(
            "SELECT n_live_tup, n_dead_tup, n_tup_del FROM pg_stat_user_tables "
            "WHERE relname = 'job_audit'").fetchone())[2] >= 100000 else None,
            timeout=60, interval=0.1, message="job_audit's deletes in the statistics")
        html = viewer.get("/_overview/alerts").get_data(as_text=True)
    live, dead, _ = row
    assert states(html)["JobwardenDeadTuplesPiling"] == "FIRING"
    assert detail(html, "JobwardenDeadTuplesPiling") == f"job_audit {dead} dead, {live} live"


def test_the_alerts_panel_loads_then_polls_with_a_trigger_htmx_can_read(viewer, healthy):
    html = viewer.get("/").get_data(as_text=True)
    trigger = re.search(r'id="overview-alerts".*?hx-trigger="([^"]+)"', html, re.S).group(1)
    # htmx separates triggers with commas: "load every 5s" is one unknown trigger.
    assert re.fullmatch(r"load, every \d+s", trigger), trigger
