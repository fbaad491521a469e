"""SLA panels agree with themselves: a BREACHED card has a breached interval and says why;
failure rate counts final job outcomes (unknown apart), raised executions separately."""

from __future__ import annotations

import re

import pytest

from jobwarden.console.data import sample_data


@pytest.fixture
def send_email_sla(engine):
    with engine.begin() as conn:
        conn.exec_driver_sql("""
            INSERT INTO job_types (type, queue, max_attempts, lease_seconds, backoff,
                                   sla_seconds, version, repeat_safe, published_by)
            VALUES ('send_email', 'email', 3, 30, '{}', 30, 1, true, 'test')""")


def card(html: str, job_type: str) -> str:
    return html.split(f'id="sla-{job_type}"')[1].split("</article>")[0]


def test_a_job_waiting_past_its_target_breaches_the_newest_interval(
        viewer, engine, send_email_sla):
    with engine.begin() as conn:
        conn.exec_driver_sql("""
            INSERT INTO background_jobs (queue, type, payload, available_at)
            VALUES ('email', 'send_email', '{}', now() - interval '5 minutes')""")
    html = card(viewer.get("/sla").get_data(as_text=True), "send_email")
    assert 'data-testid="sla-breach"' in html
    assert "a job waiting now has passed the target" in html
    assert re.search(r'data-testid="breached-intervals">1 of 12', html)
    assert 'data-testid="y-max">' in html and "viewBox=\"-40 0" in html


def test_failure_rate_counts_final_outcomes_and_unknown_apart(viewer, engine, send_email_sla):
    with engine.begin() as conn:
        for status, n in (("completed", 6), ("failed", 2), ("unknown", 2)):
            for _ in range(n):
                job_id = sample_data.insert_job(conn, "send_email", "running", queue="email")
                outcome = {"completed": "completed", "failed": "failed",
                           "unknown": "unknown"}[status]
                sample_data.insert_execution(conn, job_id, outcome=outcome, started_ago=120)
                conn.exec_driver_sql(
                    f"UPDATE background_jobs SET status = '{status}', lease_expires_at = NULL "
                    f"WHERE id = {job_id}")
    html = card(viewer.get("/sla").get_data(as_text=True), "send_email")
    assert re.search(r'data-testid="failure-rate">25\.0%', html)  # 2 of 8 final
    assert "2 unknown, awaiting review" in html
    assert re.search(r'data-testid="raised-rate">40\.0%', html)  # 4 of 10 executions raised
