"""A worker frozen past its lease (SIGSTOP) while another completes its job, then woken
(SIGCONT): the zombie's heartbeat and its completion match zero rows, it discards its
result and says so, and the job and its history stay exactly as the owner left them."""

from __future__ import annotations

import signal

import psycopg
import pytest

from tests.chaos.support import add, events, running_on, settle
from tests.helpers import executions, job_row, scalar, wait_for

pytestmark = pytest.mark.chaos


def freeze_until_taken_over(workers, url: str, job_id: int):
    """Freeze the worker running the job; another worker recovers and completes it."""
    zombie = workers.all[-1]
    first = running_on(url, job_id)
    zombie.signal(signal.SIGSTOP)
    owner = workers.start()
    done = settle(url, job_id)
    assert (done["status"], done["attempts"]) == ("completed", 2)
    assert done["execution_id"] != first["execution_id"]
    history = executions(url, job_id)
    assert [e["outcome"] for e in history] == ["worker_lost", "completed"]
    return zombie, owner, done, history


def assert_untouched(url: str, job_id: int, done: dict, history: list[dict]) -> None:
    after = job_row(url, job_id)
    for column in ("status", "attempts", "execution_id", "worker_id", "completed_at",
                   "cancelled_at", "last_error_code", "heartbeat_at", "lease_expires_at"):
        assert after[column] == done[column], column
    assert executions(url, job_id) == history


def test_a_woken_zombie_has_its_heartbeat_refused_and_stops(workers, chaos_db):
    workers.start()
    job_id = add(chaos_db, "chaos.cancellable", {"first_steps": 2000, "steps": 5})
    zombie, _owner, done, history = freeze_until_taken_over(workers, chaos_db, job_id)

    zombie.signal(signal.SIGCONT)
    # Its next heartbeat matches zero rows: the lease is lost, the handler is told to stop.
    wait_for(lambda: zombie.logged("lease lost"), message="the zombie to learn its lease is lost")
    wait_for(lambda: zombie.logged("lost its lease; result discarded"),
             message="the zombie to discard its result")
    assert (zombie.pid, "cancel_seen") in [(e[1], e[2]) for e in events(chaos_db, job_id)]
    assert_untouched(chaos_db, job_id, done, history)  # in particular: not cancelled
    assert zombie.alive()


def test_a_woken_zombie_has_its_completion_refused(workers, chaos_db):
    workers.start()
    job_id = add(chaos_db, "chaos.sleep", {"first_seconds": 2, "seconds": 0.1})
    zombie, owner, done, history = freeze_until_taken_over(workers, chaos_db, job_id)

    # Hold the zombie's heartbeat on a row lock, so that its handler returns and tries to
    # complete before the heartbeat can tell it the lease is gone.
    worker_id = scalar(chaos_db, "SELECT worker_id FROM job_workers WHERE pid = %s",
                       [zombie.pid])
    with psycopg.connect(chaos_db) as blocker:
        blocker.execute("SELECT 1 FROM job_workers WHERE worker_id = %s FOR UPDATE",
                        [worker_id])
        zombie.signal(signal.SIGCONT)
        wait_for(lambda: zombie.logged("no longer owns the job (recorded as worker_lost); "
                                       "its completed result is discarded"),
                 message="the zombie's completion to be refused")
        blocker.rollback()
    assert (zombie.pid, "returned") in [(e[1], e[2]) for e in events(chaos_db, job_id)]
    assert_untouched(chaos_db, job_id, done, history)
    # Its order was in the transaction that commits with the completion: rolled back.
    orders = scalar(chaos_db, "SELECT array_agg(execution_id) FROM chaos_orders "
                              "WHERE job_id = %s", [job_id])
    assert orders == [done["execution_id"]]
    assert str(owner.pid) in done["worker_id"]
    wait_for(lambda: scalar(chaos_db, "SELECT state FROM job_workers WHERE worker_id = %s",
                            [worker_id]) == "running", message="the zombie to carry on")
