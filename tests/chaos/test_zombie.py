"""A worker frozen past its lease (SIGSTOP) while another completes its job, then woken
(SIGCONT): the zombie's heartbeat and completion match zero rows, it discards its
result and says so, and the job and its history stay exactly as the owner left them."""

from __future__ import annotations

import signal

import pytest

from tests.chaos.support import add, events, running_on, settle
from tests.helpers import executions, job_row, scalar, wait_for

pytestmark = pytest.mark.chaos


def test_a_worker_frozen_past_its_lease_changes_nothing_when_it_wakes(workers, chaos_db):
    a = workers.start()
    job_id = add(chaos_db, "chaos.sleep", {"first_seconds": 2, "seconds": 0.1})
    first = running_on(chaos_db, job_id)
    a.signal(signal.SIGSTOP)

    b = workers.start()
    done = settle(chaos_db, job_id)  # b recovers the lapsed lease and runs it again
    assert (done["status"], done["attempts"]) == ("completed", 2)
    assert done["execution_id"] != first["execution_id"]
    history = executions(chaos_db, job_id)
    assert [e["outcome"] for e in history] == ["worker_lost", "completed"]

    a.signal(signal.SIGCONT)
    # The zombie's handler finishes its sleep and returns; the worker must refuse it.
    wait_for(lambda: (a.pid, "returned") in [(e[1], e[2]) for e in events(chaos_db, job_id)],
             message="the zombie's handler to return")
    wait_for(lambda: a.logged("discarded"), message="the zombie to log its discarded result")
    assert a.logged(f"job {job_id}")

    after = job_row(chaos_db, job_id)
    for column in ("status", "attempts", "execution_id", "worker_id", "completed_at",
                   "last_error_code", "heartbeat_at", "lease_expires_at"):
        assert after[column] == done[column], column
    assert executions(chaos_db, job_id) == history
    # The zombie's order was in the transaction that commits with the completion: gone.
    orders = scalar(chaos_db, "SELECT array_agg(execution_id) FROM chaos_orders "
                              "WHERE job_id = %s", [job_id])
    assert orders == [done["execution_id"]]
    assert str(b.pid) in after["worker_id"]
    assert a.alive()  # the zombie lives on as a healthy worker
