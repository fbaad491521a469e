"""The Schedules page: next run, last run and its outcome, paused or not; pause audited."""

from __future__ import annotations

import html
from datetime import UTC, datetime

import psycopg
import pytest

from jobwarden import Registry, job
from jobwarden.worker.duties.scheduler import publish, run_once
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.ops import operations
from tests.helpers import scalar


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


def break_schedule(url: str, job_type: str, *, cron: str = "0 3 * * *", tz: str = "UTC"):
    """A row this console and its workers cannot read (another tzdata, a newer cron)."""
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO job_schedules (type, cron, timezone, next_run_at, "
                     "published_by) VALUES (%s, %s, %s, now() - interval '1 day', 'w0')",
                     (job_type, cron, tz))


def test_a_broken_schedule_is_shown_broken_with_its_reason_beside_the_good_ones(
        operator, post_form, clean_db):
    publish_report_schedule(clean_db)
    break_schedule(clean_db, "on_mars", tz="Mars/Olympus")
    break_schedule(clean_db, "bad_cron", cron="61 * * * *")
    response = operator.get("/schedules")
    assert response.status_code == 200
    page = html.unescape(response.get_data(as_text=True))
    assert 'data-schedule="nightly_report"' in page and "2026-12-01 03:00:00 CET" in page
    for broken, reason in (("on_mars", "unknown schedule_tz 'Mars/Olympus'"),
                           ("bad_cron", "invalid schedule '61 * * * *'")):
        row = page.split(f'data-schedule="{broken}"')[1].split("</tr>")[0]
        assert 'data-testid="schedule-broken"' in row and reason in row, row
    # the pause action works for a broken schedule and for a good one
    for job_type in ("on_mars", "nightly_report"):
        response = post_form(operator, f"/schedules/{job_type}/pause",
                             {"reason": "tzdata mismatch", "request_id": f"p-{job_type}"},
                             token_from="/schedules")
        assert response.status_code == 303
    assert scalar(clean_db, "SELECT array_agg(type ORDER BY type) FROM job_schedules "
                            "WHERE paused") == ["nightly_report", "on_mars"]
    response = post_form(operator, "/schedules/on_mars/resume",
                         {"reason": "tzdata updated", "request_id": "r-mars"},
                         token_from="/schedules")
    assert response.status_code == 303
    assert scalar(clean_db, "SELECT paused FROM job_schedules WHERE type = 'on_mars'") is False


def test_broken_schedules_are_counted_on_metrics(viewer, clean_db):
    publish_report_schedule(clean_db)
    break_schedule(clean_db, "on_mars", tz="Mars/Olympus")
    text = viewer.get("/metrics").get_data(as_text=True)
    assert 'jobwarden_schedule_broken{type="on_mars"} 1.0' in text, text[-1500:]
    assert 'jobwarden_schedule_broken{type="nightly_report"} 0.0' in text
    assert "jobwarden_schedules_broken 1.0" in text


def audit_rows(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT action, actor, role, reason, request_id FROM job_audit "
                            "ORDER BY id").fetchall()


def test_pausing_a_schedule_records_the_request_id_and_a_resubmission_acts_once(
        operator, post_form, clean_db):
    publish_report_schedule(clean_db)
    form = {"reason": "provider migration", "request_id": "s-pause-1"}
    post_form(operator, "/schedules/nightly_report/pause", form, token_from="/schedules")
    # resumed by someone else meanwhile; the same form submitted again must not pause again
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE job_schedules SET paused = false")
    page = post_form(operator, "/schedules/nightly_report/pause", form, token_from="/schedules",
                     follow_redirects=True).get_data(as_text=True)
    assert "Already done" in page
    assert scalar(clean_db, "SELECT paused FROM job_schedules") is False
    assert audit_rows(clean_db) == [
        ("pause_schedule", "otto", "operator", "provider migration", "s-pause-1")]


def test_schedule_pause_checks_role_reason_and_text_like_every_other_action(clean_db):
    publish_report_schedule(clean_db)
    with psycopg.connect(clean_db) as conn:
        with pytest.raises(PermissionError, match="viewer"):
            operations.pause_schedule(conn, "nightly_report", actor="vera", role="viewer",
                                      reason="x", request_id="v-1")
        for bad in ("nightly\x00report", "nightly\nreport"):
            with pytest.raises(ValueError, match="invalid schedule name"):
                operations.pause_schedule(conn, bad, actor="otto", role="operator",
                                          reason="x", request_id="o-1")
        with pytest.raises(ValueError, match="needs a reason"):
            operations.pause_schedule(conn, "nightly_report", actor="otto", role="operator",
                                      reason="  ", request_id="o-1")
        result = operations.pause_schedule(conn, "nightly_report", actor="otto",
                                           role="operator", reason="a\x00b" + "y" * 900,
                                           request_id="o-2")
        conn.commit()
    assert result.ok
    ((_, _, _, reason, request_id),) = audit_rows(clean_db)
    # a NUL is stored visibly escaped, as in every action's reason (worker/core/storable.py)
    assert reason.startswith("a\\x00b") and len(reason) == operations.REASON_MAX
    assert request_id == "o-2"


def test_run_now_enqueues_the_schedules_job_audited_and_leaves_its_ticks(operator, post_form,
                                                                         clean_db):
    publish_report_schedule(clean_db)
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE job_schedules SET payload = '{\"region\": \"eu\"}', paused = true")
        conn.commit()
        before = conn.execute("SELECT next_run_at, count(*) OVER () FROM job_schedules"
                              ).fetchone()
        jobs_before = conn.execute("SELECT count(*) FROM background_jobs").fetchone()[0]
    page = operator.get("/schedules").get_data(as_text=True)
    assert 'data-action="run"' in page and "Run now" in page
    response = post_form(operator, "/schedules/nightly_report/run",
                         {"reason": "customer asked for today's report", "request_id": "run-1"},
                         token_from="/schedules", follow_redirects=True)
    page = response.get_data(as_text=True)
    with psycopg.connect(clean_db) as conn:
        job_id, status, payload, available = conn.execute(
            "SELECT id, status, payload, available_at <= now() FROM background_jobs "
            "ORDER BY id DESC LIMIT 1").fetchone()
        schedule = conn.execute("SELECT next_run_at, paused, last_job_id, last_run_at <= now() "
                                "FROM job_schedules").fetchone()
        total = conn.execute("SELECT count(*) FROM background_jobs").fetchone()[0]
    assert f"job #{job_id} enqueued to run now. Its schedule stays paused." in html.unescape(page)
    assert (status, payload, available, total) == ("pending", {"region": "eu"}, True,
                                                   jobs_before + 1)
    # its ticks are as they were: the next one, the pause; the run is its last one
    assert schedule == (before[0], True, job_id, True)
    assert f'href="/jobs/{job_id}"' in page
    assert audit_rows(clean_db)[-1] == (
        "run_schedule", "otto", "operator", "customer asked for today's report", "run-1")
    assert scalar(clean_db, "SELECT job_id::int || ' ' || (details->>'schedule') FROM job_audit "
                            "WHERE action = 'run_schedule'") == f"{job_id} nightly_report"
    # the same form again acts once
    again = post_form(operator, "/schedules/nightly_report/run",
                      {"reason": "customer asked for today's report", "request_id": "run-1"},
                      token_from="/schedules", follow_redirects=True).get_data(as_text=True)
    assert "Already done" in again
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == jobs_before + 1


def test_run_now_needs_the_operator_role_and_a_schedule_that_exists(viewer, post_form,
                                                                    clean_db):
    publish_report_schedule(clean_db)
    assert post_form(viewer, "/schedules/nightly_report/run",
                     {"reason": "x", "request_id": "v-run"},
                     token_from="/schedules").status_code == 403
    assert 'data-action="run"' not in viewer.get("/schedules").get_data(as_text=True)
    with psycopg.connect(clean_db) as conn:
        result = operations.run_schedule_now(conn, "no_such", actor="otto", role="operator",
                                             reason="typo")
        assert not result.ok and "does not exist" in result.message
        with pytest.raises(PermissionError, match="viewer"):
            operations.run_schedule_now(conn, "nightly_report", actor="vera", role="viewer",
                                        reason="x")
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 0
