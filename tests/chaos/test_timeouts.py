"""Execution timeouts (maximum duration, independent of heartbeats): the worker asks the
handler to stop, then abandons the execution with TIMEOUT and schedules the retry. A
handler stuck in a blocking call cannot keep its slot; when abandoned threads pile up
past the limit, the worker restarts itself cleanly."""

from __future__ import annotations

import pytest

from tests.chaos.support import add, events, outcomes, settle
from tests.helpers import executions, job_row, scalar, wait_for

pytestmark = pytest.mark.chaos


def test_a_handler_that_heartbeats_forever_still_ends_at_its_timeout(workers, chaos_db,
                                                                      handler_app):
    workers.start(handler_app)
    job_id = add(chaos_db, "chaos.beat_forever")
    row = settle(chaos_db, job_id, timeout=30)
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("failed", 2, "TIMEOUT")
    history = executions(chaos_db, job_id)
    assert [e["outcome"] for e in history] == ["timeout", "timeout"]
    for e in history:  # timeout 1.5 s, then 1.5 s to stop, checked every heartbeat
        assert 1500 <= e["duration_ms"] < 1500 + 1500 + 1500, e["duration_ms"]
    # A thread is abandoned and finds out at its next heartbeat (LeaseLost); a task is
    # cancelled at its timeout (CancelledError). Either way both stop: none piles up.
    stop = "stopped:CancelledError" if handler_app.endswith("async_app") else "stopped:LeaseLost"
    wait_for(lambda: [e[2] for e in events(chaos_db, job_id)].count(stop) == 2,
             message="both timed-out handlers to stop")


def test_a_handler_stuck_in_a_blocking_call_is_abandoned_and_the_worker_restarts(
        workers, chaos_db):
    w = workers.start(concurrency=1, grace=1)
    stuck = add(chaos_db, "chaos.stuck")
    row = settle(chaos_db, stuck, timeout=30)
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("failed", 2, "TIMEOUT")
    assert outcomes(chaos_db, stuck) == ["timeout", "timeout"]
    assert [e[2] for e in events(chaos_db, stuck)] == ["started", "started"]  # never returned

    # Two threads stuck for good with one slot: the worker re-executes itself (same pid).
    wait_for(lambda: scalar(chaos_db, "SELECT count(*) FROM job_workers WHERE pid = %s "
                                      "AND state = 'running'", [w.pid]) == 1
             and scalar(chaos_db, "SELECT count(*) FROM job_workers WHERE pid = %s",
                        [w.pid]) == 2, message="the worker to restart itself")
    assert w.alive() and w.logged("restarting")
    after = add(chaos_db, "chaos.quick")
    row = settle(chaos_db, after)
    assert row["status"] == "completed"
    new_id = scalar(chaos_db, "SELECT worker_id FROM job_workers WHERE pid = %s "
                              "AND state = 'running'", [w.pid])
    assert job_row(chaos_db, after)["worker_id"] == new_id != job_row(chaos_db, stuck)["worker_id"]
