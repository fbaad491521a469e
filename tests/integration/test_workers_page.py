"""Workers page: queues with their running slots, linked running jobs, jobs/min, times."""

from __future__ import annotations

import re

import pytest

from jobwarden.console.data import sample_data


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


def test_a_worker_with_lanes_shows_each_lane_with_its_slots(viewer, engine):
    with engine.begin() as conn:
        sample_data.insert_worker(
            conn, "w-lanes", queues=("email", "reports", "*"), concurrency=15,
            lanes=[{"queues": ["email"], "slots": 4, "shared": False},
                   {"queues": ["reports"], "slots": 1, "shared": False},
                   {"queues": ["*"], "slots": 10, "shared": True}])
        sample_data.insert_worker(conn, "w-old", queues=("*",), concurrency=3)
        for queue in ("email", "email", "reports", "billing"):
            sample_data.insert_job(conn, "t", "running", queue=queue, worker_id="w-lanes")
    html = viewer.get("/workers").get_data(as_text=True)
    lanes = html.split('id="w-lanes"')[1].split("</article>")[0]
    lanes = lanes.split('data-testid="worker-slots">')[1].split("</dd>")[0]
    assert [_text(lane) for lane in lanes.split("<br>")] == [
        "email (2) — 4 slots", "reports (1) — 1 slot", "other queues (1) — 10 slots"]
    old = html.split('id="w-old"')[1].split("</article>")[0]
    assert _text(old.split('data-testid="worker-slots">')[1].split("</dd>")[0]) == \
        "all queues (0) — 3 slots"


def _text(html: str) -> str:
    """What a reader sees: tags dropped, white space folded."""
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def test_a_worker_whose_event_loop_is_stalled_says_so(viewer, engine):
    """job_workers.loop_lag_ms, written by the heartbeat (worker/engine/loops.py): a lag
    past the worker's stall threshold reads as a stall, a small one as a lag, and a
    worker without coroutine handlers shows no loop at all."""
    with engine.begin() as conn:
        for worker_id, lag in (("w-stalled", 3240.0), ("w-fine", 3.0), ("w-threads", None)):
            sample_data.insert_worker(conn, worker_id, queues=("*",), concurrency=4)
            conn.exec_driver_sql("UPDATE job_workers SET loop_lag_ms = %(lag)s "
                                 "WHERE worker_id = %(id)s", {"lag": lag, "id": worker_id})
    html = viewer.get("/workers").get_data(as_text=True)

    def loop_of(worker_id: str) -> str | None:
        panel = html.split(f'id="{worker_id}"')[1].split("</article>")[0]
        if 'data-testid="worker-loop">' not in panel:
            return None
        return _text(panel.split('data-testid="worker-loop">')[1].split("</dd>")[0])

    assert loop_of("w-stalled").startswith("stalled 3.2s")
    assert "blocking its lane's loop" in loop_of("w-stalled")
    assert loop_of("w-fine") == "lag 3 ms"
    assert loop_of("w-threads") is None
