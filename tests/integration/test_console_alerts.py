"""The overview's Alerts panel: each condition of the Prometheus rules, firing or ok."""

from __future__ import annotations

import re

import pytest

from console import sample_data


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
    assert len(found) == 6 and set(found.values()) == {"ok"}


def test_an_incident_fires_each_condition_it_meets(viewer, incident):
    html = viewer.get("/_overview/alerts").get_data(as_text=True)
    assert states(html) == {
        "JobwardenFailedRateHigh": "FIRING", "JobwardenPendingOverSLA": "FIRING",
        "JobwardenStaleHeartbeats": "FIRING", "JobwardenNoLiveWorker": "FIRING",
        "JobwardenQueueGrowing": "FIRING", "JobwardenCompletionsDropped": "FIRING"}
    assert "send_email 25% of 20" in html and "no live worker for reports" in html
    assert "reports (+60 in 15 min, 60 waiting)" in html  # email: 20 started, 0 arrived
    assert "15 in the last hour, usually 100" in html
