"""Workers page: queues with their running slots, linked running jobs, jobs/min, times."""

from __future__ import annotations

import pytest

from console import sample_data


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        ids = sample_data.seed_console_scenario(conn)
        for i in range(10):  # w-app1-1 finished 10 executions in the last 5 minutes
            job_id = sample_data.insert_job(conn, "send_email", "completed", queue="email")
            sample_data.insert_execution(conn, job_id, started_ago=60 + i, worker_id="w-app1-1")
        return ids


def test_each_worker_shows_slots_rate_running_jobs_and_times(viewer, scenario):
    html = viewer.get("/workers").get_data(as_text=True)
    app1 = html.split('id="w-app1-1"')[1].split("</article>")[0]
    assert 'data-testid="worker-rate">2.0 ' in app1
    assert ">default</a> (0)" in app1 and ">email</a> (0)" in app1
    app2 = html.split('id="w-app2-7"')[1].split("</article>")[0]
    assert ">reports</a> (1)" in app2 and f'/jobs/{scenario["running"]}"' in app2
    assert "UTC</time>" in app2 and "ago</span>" in app2
