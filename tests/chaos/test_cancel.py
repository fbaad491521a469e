"""Cooperative cancellation: a pending job is cancelled at once; a running one is asked
(cancel_requested_at), learns it with its next heartbeat and ends cancelled when its
handler stops. A request is never lost, even if the worker dies before seeing it."""

from __future__ import annotations

import time

import pytest

from tests.chaos.support import add, cancel, events, outcomes, running_on, settle
from tests.helpers import job_row, scalar

pytestmark = pytest.mark.chaos


def test_cancelling_a_pending_job_cancels_it_at_once(workers, chaos_db):
    job_id = add(chaos_db, "chaos.quick", delay=60)
    assert cancel(chaos_db, job_id) == "cancelled"
    row = job_row(chaos_db, job_id)
    # The operator's cancel (jobwarden.worker.ops.operations) leaves no error code: its reason is in the
    # audit row it writes in the same statement.
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("cancelled", 0, None)
    assert row["cancelled_at"] is not None and outcomes(chaos_db, job_id) == []
    assert scalar(chaos_db, "SELECT count(*) FROM job_audit WHERE job_id = %s AND "
                            "action = 'cancel'", [job_id]) == 1


def test_cancelling_a_running_job_stops_it_at_its_next_heartbeat(workers, chaos_db,
                                                                   handler_app):
    workers.start(handler_app)
    job_id = add(chaos_db, "chaos.cancellable")
    running_on(chaos_db, job_id)
    assert cancel(chaos_db, job_id) == "requested"
    asked = time.monotonic()
    row = settle(chaos_db, job_id, timeout=10)
    assert time.monotonic() - asked < 3  # a heartbeat is a third of the 1 s lease
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("cancelled", 1, "CANCELLED")
    assert row["cancelled_at"] is not None
    assert [e[2] for e in events(chaos_db, job_id)] == ["started", "cancel_seen"]
    assert outcomes(chaos_db, job_id) == ["cancelled"]

    # Cancelling a job that has already finished changes nothing.
    done = add(chaos_db, "chaos.quick")
    settle(chaos_db, done)
    assert cancel(chaos_db, done) == "finished"
    assert job_row(chaos_db, done)["status"] == "completed"


def test_a_cancel_request_outlives_the_worker_that_never_saw_it(workers, chaos_db, handler_app):
    a = workers.start(handler_app)
    job_id = add(chaos_db, "chaos.sleep", {"first_seconds": 120, "seconds": 0.1})
    running_on(chaos_db, job_id)
    assert cancel(chaos_db, job_id) == "requested"
    a.kill()
    workers.start(handler_app)
    row = settle(chaos_db, job_id)
    # Recovered, but not retried: the request to cancel stands.
    assert (row["status"], row["attempts"]) == ("cancelled", 1)
    assert outcomes(chaos_db, job_id) == ["worker_lost"]
    assert [e[2] for e in events(chaos_db, job_id)] == ["started"]
