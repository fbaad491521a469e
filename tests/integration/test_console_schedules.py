"""The Schedules page: next run, last run and its outcome, paused or not; pause audited."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from tests.helpers import scalar
from worker import Registry, job
from worker.job_types import publish_job_types
from worker.scheduler import publish, run_once


def publish_report_schedule(url: str) -> int:
    reg = Registry()
    job("nightly_report", schedule="0 3 * * *", schedule_tz="Europe/Berlin",
        registry=reg)(lambda c, p: None)
    with psycopg.connect(url) as conn:
        publish_job_types(conn, list(reg), published_by="w1")
        publish(conn, reg, "w1", now=datetime(2026, 11, 29, 12, tzinfo=UTC))
        conn.commit()
        ran = run_once(conn, reg, now=datetime(2026, 11, 30, 9, tzinfo=UTC))
        conn.execute("UPDATE background_jobs SET status = 'failed', failed_at = now(), "
                     "last_error_code = 'PROVIDER_5XX'")
        conn.commit()
    return ran["nightly_report"][0]


def test_a_viewer_sees_next_run_last_run_and_its_outcome(viewer, clean_db):
    job_id = publish_report_schedule(clean_db)
    page = viewer.get("/schedules").get_data(as_text=True)
    assert 'data-schedule="nightly_report"' in page and "0 3 * * *" in page
    # the next and the last run, shown in the schedule's zone, the instant itself in UTC
    assert '<time datetime="2026-12-01T02:00:00+00:00">2026-12-01 03:00:00 CET</time>' in page
    assert '<time datetime="2026-11-30T02:00:00+00:00">2026-11-30 03:00:00 CET</time>' in page
    assert f'href="/jobs/{job_id}"' in page and "PROVIDER_5XX" in page
    assert 'data-action="pause"' not in page  # viewers get no buttons


def test_an_operator_pauses_and_resumes_a_schedule_with_an_audit_row(operator, post_form,
                                                                     clean_db):
    publish_report_schedule(clean_db)
    response = post_form(operator, "/schedules/nightly_report/pause",
                         {"reason": "provider migration", "request_id": "s-1"},
                         token_from="/schedules")
    assert response.status_code == 303
    page = operator.get("/schedules").get_data(as_text=True)
    assert "is paused" in page and 'data-action="resume"' in page
    assert scalar(clean_db, "SELECT paused FROM job_schedules") is True
    post_form(operator, "/schedules/nightly_report/resume", {"reason": "done", "request_id": "s-2"},
              token_from="/schedules")
    assert scalar(clean_db, "SELECT paused FROM job_schedules") is False
    assert scalar(clean_db, "SELECT array_agg(action || ':' || actor ORDER BY id) FROM job_audit") \
        == ["pause_schedule:otto", "resume_schedule:otto"]


def test_a_viewer_cannot_pause_a_schedule(viewer, post_form, clean_db):
    publish_report_schedule(clean_db)
    response = post_form(viewer, "/schedules/nightly_report/pause",
                         {"reason": "x", "request_id": "v-1"}, token_from="/schedules")
    assert response.status_code == 403
    assert scalar(clean_db, "SELECT paused FROM job_schedules") is False
