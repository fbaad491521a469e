"""A coroutine handler that blocks its event loop (a synchronous call inside `async
def`): the heartbeat thread keeps its lease and says the loop is stalled (the worker
log, with where it is stuck, and `job_workers.loop_lag_ms` for the Workers page); its
timeout ends it as `timeout` (the task cannot be cancelled, so it is abandoned); and a
loop held by an abandoned handler makes the worker restart, since nothing more can run
on it (worker/engine/loops.py, worker/engine/executor.py)."""

from __future__ import annotations

import pytest

from tests.chaos.conftest import HANDLER_APPS
from tests.chaos.support import add, events, outcomes, settle
from tests.helpers import executions, job_row, scalar, wait_for

pytestmark = pytest.mark.chaos

ASYNC_APP = HANDLER_APPS["coroutine"]


def test_a_blocking_call_in_a_coroutine_stalls_its_loop_but_not_its_lease(workers, chaos_db):
    w = workers.start(ASYNC_APP, concurrency=2, grace=1)
    stuck = add(chaos_db, "chaos.stuck")
    wait_for(lambda: w.logged("event loop stalled"), message="the stall to be logged")
    log = w.log.read_text(errors="replace")
    stall = next(line for line in log.splitlines() if "event loop stalled" in line)
    assert f"jobs on it: [{stuck}]" in stall and "chaos_async_app.py" in stall
    assert "stuck_job" in stall  # where the loop thread is stuck
    # The heartbeat thread reports the stall while it lasts (the Workers page reads it).
    wait_for(lambda: (scalar(chaos_db, "SELECT loop_lag_ms FROM job_workers WHERE pid = %s "
                                       "AND state = 'running'", [w.pid]) or 0) >= 500,
             message="the worker's row to show the stall")

    # Its lease (1 s) outlives the stall: the execution ends at its 1 s timeout, as a
    # timeout, not as a lost worker; the handler never returned.
    first = wait_for(lambda: (e := executions(chaos_db, stuck)) and e[0]["finished_at"]
                     and e[0], timeout=15, message="the first execution to end")
    assert (first["outcome"], first["error_code"]) == ("timeout", "TIMEOUT")
    assert [e[2] for e in events(chaos_db, stuck)][:1] == ["started"]
    assert "returned" not in [e[2] for e in events(chaos_db, stuck)]

    # The loop stays held by the abandoned handler: the worker restarts itself (same
    # pid, a new worker row), and the retry ends the same way on the fresh process.
    wait_for(lambda: w.logged("restarting the worker cleanly"), timeout=20,
             message="the worker to restart for its held loop")
    row = settle(chaos_db, stuck, timeout=40)
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("failed", 2, "TIMEOUT")
    # The retry, claimed while the loop was held, was never offered to it: it was handed
    # back (no attempt spent) when the worker restarted, and ran on the fresh process.
    assert [o for o in outcomes(chaos_db, stuck) if o != "handed_back"] == ["timeout", "timeout"]
    assert w.alive()
    after = add(chaos_db, "chaos.quick")
    assert settle(chaos_db, after, timeout=40)["status"] == "completed"
    assert scalar(chaos_db, "SELECT count(*) FROM job_workers WHERE pid = %s", [w.pid]) >= 2
    assert job_row(chaos_db, after)["worker_id"] != job_row(chaos_db, stuck)["worker_id"]


def test_a_coroutine_that_swallows_its_cancellation_is_abandoned_at_its_timeout(
        workers, chaos_db):
    """Cancelled at its timeout, the handler catches CancelledError and goes on awaiting:
    after the grace it is abandoned (slot freed, TIMEOUT recorded), and its lane's loop,
    not blocked, keeps running other jobs."""
    workers.start(ASYNC_APP, concurrency=2, grace=1)
    stubborn = add(chaos_db, "chaos.stubborn", max_attempts=2)  # a type only the worker knows
    row = settle(chaos_db, stubborn, timeout=30)
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("failed", 2, "TIMEOUT")
    history = executions(chaos_db, stubborn)
    for e in history:  # 1 s timeout, then at most 1 s to stop, checked every heartbeat
        assert 1000 <= e["duration_ms"] < 1000 + 1000 + 1500, e["duration_ms"]
    assert [e[2] for e in events(chaos_db, stubborn)].count("swallowed:CancelledError") == 2
    quick = add(chaos_db, "chaos.quick")
    assert settle(chaos_db, quick)["status"] == "completed"
