"""A worker frozen past its lease (SIGSTOP) while another takes its job, then woken
(SIGCONT): the zombie's heartbeat and its completion match zero rows, it discards its
result and says so, and the job and its history stay exactly as the owner left them --
whether the owner has already finished or is still running (then only the execution
token tells the two apart)."""

from __future__ import annotations

import signal
from contextlib import contextmanager

import psycopg
import pytest

from tests.chaos.support import add, events, freeze_between_transactions, running_on, settle
from tests.helpers import executions, job_row, scalar, wait_for

pytestmark = pytest.mark.chaos


def freeze_until_taken_over(workers, url: str, job_id: int):
    """Freeze the worker running the job; another worker recovers and completes it."""
    zombie = workers.all[-1]
    first = running_on(url, job_id)
    freeze_between_transactions(zombie, url)
    owner = workers.start()
    done = settle(url, job_id)
    assert (done["status"], done["attempts"]) == ("completed", 2)
    assert done["execution_id"] != first["execution_id"]
    history = executions(url, job_id)
    assert [e["outcome"] for e in history] == ["worker_lost", "completed"]
    return zombie, owner, done, history


REFUSED = "no longer owns the job (recorded as worker_lost); its completed result is discarded"


@contextmanager
def woken_with_its_heartbeat_held(zombie, url: str):
    """SIGCONT the zombie while a row lock holds its heartbeat, so that its handler tries
    to complete before the heartbeat can tell it the lease is gone; yields its worker id."""
    worker_id = scalar(url, "SELECT worker_id FROM job_workers WHERE pid = %s", [zombie.pid])
    with psycopg.connect(url) as blocker:
        blocker.execute("SELECT 1 FROM job_workers WHERE worker_id = %s FOR UPDATE",
                        [worker_id])
        zombie.signal(signal.SIGCONT)
        yield worker_id
        blocker.rollback()


def event_totals(url: str) -> dict[tuple[str, str], int]:
    with psycopg.connect(url) as conn:
        return {(e, t): n for e, t, n in conn.execute(
            "SELECT event, type, total FROM job_event_totals").fetchall()}


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
    # Counted once for /metrics, as learned from the lease; the recovery that made it one too.
    assert event_totals(chaos_db) == {("recovered", "chaos.cancellable"): 1,
                                      ("zombie_lease", "chaos.cancellable"): 1}


def test_a_woken_zombie_has_its_completion_refused(workers, chaos_db):
    workers.start()
    job_id = add(chaos_db, "chaos.sleep", {"first_seconds": 2, "seconds": 0.1})
    zombie, owner, done, history = freeze_until_taken_over(workers, chaos_db, job_id)

    with woken_with_its_heartbeat_held(zombie, chaos_db) as worker_id:
        wait_for(lambda: zombie.logged(REFUSED), message="the zombie's completion to be refused")
    assert (zombie.pid, "returned") in [(e[1], e[2]) for e in events(chaos_db, job_id)]
    assert_untouched(chaos_db, job_id, done, history)
    assert event_totals(chaos_db) == {("recovered", "chaos.sleep"): 1,
                                      ("zombie_outcome", "chaos.sleep"): 1}
    # Its order was in the transaction that commits with the completion: rolled back.
    orders = scalar(chaos_db, "SELECT array_agg(execution_id) FROM chaos_orders "
                              "WHERE job_id = %s", [job_id])
    assert orders == [done["execution_id"]]
    assert str(owner.pid) in done["worker_id"]
    wait_for(lambda: scalar(chaos_db, "SELECT state FROM job_workers WHERE worker_id = %s",
                            [worker_id]) == "running", message="the zombie to carry on")


@pytest.mark.parametrize("completing", ["in_its_transaction", "through_the_completer"])
def test_a_zombie_woken_while_the_new_owner_still_runs_cannot_finish_the_job(
        workers, chaos_db, completing):
    # Its completion is written in the handler's business transaction, or buffered in the
    # worker's completer and flushed in a batch: both must be refused.
    in_transaction = completing == "in_its_transaction"
    zombie = workers.start(concurrency=1)
    job_id = add(chaos_db, "chaos.handover", {"transaction": in_transaction})
    first = running_on(chaos_db, job_id)
    freeze_between_transactions(zombie, chaos_db)
    owner = workers.start(concurrency=1)
    # The owner's worker recovers the job and starts attempt 2, which waits for its gate.
    wait_for(lambda: (2, owner.pid, "started") in events(chaos_db, job_id),
             message="the new owner's attempt to start")
    taken = job_row(chaos_db, job_id)
    assert (taken["status"], taken["attempts"]) == ("running", 2)
    assert taken["execution_id"] != first["execution_id"]

    # Its handler returns as soon as it wakes, and tries to complete the job.
    with woken_with_its_heartbeat_held(zombie, chaos_db):
        wait_for(lambda: zombie.logged(REFUSED)
                 or zombie.logged(f"job {job_id} chaos.handover -> completed"),
                 message="the zombie to try to complete the job")
    assert zombie.logged(REFUSED)
    assert event_totals(chaos_db)[("zombie_outcome", "chaos.handover")] == 1
    still = job_row(chaos_db, job_id)
    for column in ("status", "attempts", "execution_id", "worker_id"):
        assert still[column] == taken[column], column
    assert (2, owner.pid, "returned") not in events(chaos_db, job_id)  # the owner is still at work

    with psycopg.connect(chaos_db) as conn:
        conn.execute("INSERT INTO chaos_gates (job_id) VALUES (%s)", [job_id])
    done = settle(chaos_db, job_id)
    assert (done["status"], done["attempts"]) == ("completed", 2)
    assert (done["execution_id"], done["worker_id"]) == (taken["execution_id"], taken["worker_id"])
    assert events(chaos_db, job_id) == [
        (1, zombie.pid, "started"), (2, owner.pid, "started"),
        (1, zombie.pid, "returned"), (2, owner.pid, "returned")]  # the zombie finished first
    history = executions(chaos_db, job_id)
    assert [(e["execution_id"], e["outcome"]) for e in history] == [
        (first["execution_id"], "worker_lost"), (taken["execution_id"], "completed")]
    # One business effect: the owner's order; the zombie's rolled back with its completion.
    orders = scalar(chaos_db, "SELECT array_agg(execution_id) FROM chaos_orders "
                              "WHERE job_id = %s", [job_id])
    assert orders == ([taken["execution_id"]] if in_transaction else None)
