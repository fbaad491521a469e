"""GET /metrics: Prometheus exposition of queue health, for a scraper's token or a user."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from console import create_app, sample_data
from worker import Registry, enqueue, job
from worker.completer import Completer, Completion
from worker.db import DedicatedConnection
from worker.producer import claim
from worker.recovery import recover_stale_running
from worker.states import ExecutionOutcome, JobStatus

TOKEN = "scrape-me-0123456789"


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        return sample_data.seed_console_scenario(conn)


@pytest.fixture
def scraper(clean_db, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret", "DATABASE_URL": clean_db,
                      "METRICS_TOKEN": TOKEN})
    yield app.test_client()
    app.extensions["jobwarden_db"].dispose()


def samples(text: str) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_a_scraper_with_the_token_gets_job_counts_by_status(scraper, scenario):
    response = scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    found = samples(response.get_data(as_text=True))
    failed = sum(v for (name, labels), v in found.items()
                 if name == "jobwarden_jobs" and ("status", "failed") in labels)
    completed = sum(v for (name, labels), v in found.items()
                    if name == "jobwarden_jobs" and ("status", "completed") in labels)
    assert (failed, completed) == (9, 52)  # the same numbers the overview shows
    assert found[("jobwarden_oldest_pending_age_seconds", ())] > 0
    assert ("jobwarden_workers", (("state", "running"),)) in found


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": f"Basic {TOKEN}"}])
def test_metrics_refuse_anyone_without_a_token_or_session(scraper, scenario, headers):
    response = scraper.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert b"jobwarden_jobs" not in response.data


def test_a_signed_in_viewer_may_read_metrics(viewer, scenario):
    response = viewer.get("/metrics")
    assert response.status_code == 200 and b"jobwarden_jobs{" in response.data


@pytest.fixture
def alert_inputs(engine):
    """A few rows whose figures the alerting rules' families must report exactly."""
    with engine.begin() as conn:
        sample_data.insert_worker(conn, "w-email", queues=("email",))
        sample_data.insert_worker(conn, "w-all", queues=("*",), heartbeat_ago=3600)  # gone
        for duration_ms in (50.0, 400.0, 400.0, 7000.0):  # 50 ms sits on a bucket bound
            job = sample_data.insert_job(conn, "send_email", "completed", queue="email")
            sample_data.insert_execution(conn, job, started_ago=60, wait_s=3,
                                         duration_ms=duration_ms)
        for _ in range(2):
            job = sample_data.insert_job(conn, "send_email", "failed", queue="email",
                                         error_code="AUTH_FAILED")
            sample_data.insert_execution(conn, job, outcome="failed", error_code="AUTH_FAILED",
                                         started_ago=30)
        old = sample_data.insert_job(conn, "send_email", "completed", queue="email")
        sample_data.insert_execution(conn, old, started_ago=900)  # outside the 5-minute window
        for _ in range(3):
            sample_data.insert_job(conn, "export_report", "pending", queue="reports", ago=400)
        sample_data.insert_job(conn, "send_email", "pending", queue="email", ago=10)
        sample_data.insert_job(conn, "send_email", "running", queue="email",
                               heartbeat_at=func_now_minus(conn, 600))
        conn.exec_driver_sql("INSERT INTO job_types (type, queue, max_attempts, lease_seconds, "
                             "backoff, sla_seconds, version, repeat_safe, published_by) VALUES "
                             "('export_report', 'reports', 5, 60, '{}', 120, 1, true, 'w')")


def func_now_minus(conn, seconds: float):
    return conn.exec_driver_sql(f"SELECT now() - interval '{seconds} seconds'").scalar_one()


def test_metrics_give_the_alerting_rules_their_inputs(scraper, alert_inputs):
    found = samples(scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                    .get_data(as_text=True))

    def value(name, **labels):
        return found[(name, tuple(sorted(labels.items())))]

    # executions in the last 5 minutes, failures by error code; the 15-minute-old one is out
    assert value("jobwarden_executions_last_5m", queue="email", type="send_email",
                 outcome="completed", error_code="") == 4
    assert value("jobwarden_executions_last_5m", queue="email", type="send_email",
                 outcome="failed", error_code="AUTH_FAILED") == 2
    # the duration histogram is cumulative with `le` inclusive: 50 ms counts under 0.05
    bucket = "jobwarden_execution_duration_seconds_bucket"
    assert value(bucket, type="send_email", le="0.05") == 1
    assert value(bucket, type="send_email", le="0.5") == 5  # + two 400 ms + two 250 ms failed
    assert value(bucket, type="send_email", le="5.0") == 5
    assert value(bucket, type="send_email", le="10.0") == 6
    assert value(bucket, type="send_email", le="+Inf") == 6
    assert value("jobwarden_execution_duration_seconds_gsum", type="send_email") == \
        pytest.approx(0.05 + 0.4 + 0.4 + 7.0 + 0.25 + 0.25)
    waits = "jobwarden_time_to_start_seconds_bucket"
    assert (value(waits, type="send_email", le="2.5"), value(waits, type="send_email", le="5.0")) \
        == (2, 6)  # the failed ones waited 1 s, the completed ones 3 s
    # runnable work, live workers per queue (the '*' worker is gone), stale heartbeats, SLA
    assert value("jobwarden_queue_runnable_jobs", queue="reports") == 3
    assert value("jobwarden_queue_live_workers", queue="reports") == 0
    assert value("jobwarden_queue_live_workers", queue="email") == 1
    assert value("jobwarden_oldest_pending_age_by_type_seconds", queue="reports",
                 type="export_report") >= 400
    assert value("jobwarden_job_type_sla_seconds", type="export_report") == 120
    assert value("jobwarden_stale_running_jobs", queue="email", type="send_email") == 1


def test_a_paused_queue_reports_no_runnable_jobs(scraper, alert_inputs, engine):
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO queue_controls (queue, paused) VALUES ('reports', true)")
    found = samples(scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                    .get_data(as_text=True))
    assert found[("jobwarden_queue_runnable_jobs", (("queue", "reports"),))] == 0


def test_every_metric_the_alerting_rules_read_is_exposed(scraper, alert_inputs):
    rules = (Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
             / "jobwarden.rules.yml").read_text()
    wanted = set(re.findall(r"\bjobwarden_[a-z0-9_]+", rules))
    found = {name for name, _labels in samples(
        scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        .get_data(as_text=True))}
    assert wanted and wanted <= found, wanted - found


def test_recovered_and_zombie_executions_are_counters_by_type(scraper, clean_db):
    # A real zombie: execution A claims a job, its lease runs out and recovery moves the
    # job on; A's completion, flushed afterwards, matches no row and is refused.
    reg = Registry()

    @job("zombie.noop", lease=30, registry=reg)
    def noop(ctx, payload):
        raise AssertionError("the statements are driven by the test")

    with psycopg.connect(clean_db, autocommit=True) as db:
        job_id = enqueue(db, "zombie.noop", {}, registry=reg)
        (a,) = claim(db, types=["zombie.noop"], leases=[30.0], queues=None, limit=1,
                     worker_id="worker-a")
        db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' "
                   "WHERE id = %s", [job_id])
        assert recover_stale_running(db, reg) == {"pending": 1}
    completer = Completer(DedicatedConnection(clean_db), interval=3600)
    completer.submit(Completion(a.id, a.execution_id, a.type, a.attempt, 30.0,
                                JobStatus.COMPLETED, ExecutionOutcome.COMPLETED))
    completer.flush()
    assert completer.refused == 1

    text = scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).get_data(
        as_text=True)
    assert "# TYPE jobwarden_zombie_rejected_total counter" in text
    found = samples(text)
    assert found[("jobwarden_recovered_total", (("type", "zombie.noop"),))] == 1
    zombie = {dict(labels)["learned_by"]: v for (name, labels), v in found.items()
              if name == "jobwarden_zombie_rejected_total"}
    assert zombie == {"outcome": 1, "lease": 0}  # the other way of learning: at zero
