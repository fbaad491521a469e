"""SIGTERM as a deploy sends it: stop claiming at once, let running jobs finish within
--grace, hand the rest back to pending (without spending an attempt), exit 0. A second
signal stops at once."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.chaos.support import add, holding_claims, outcomes, running_on, settle
from tests.helpers import job_row, scalar, wait_for

pytestmark = pytest.mark.chaos


def test_sigterm_lets_a_running_job_finish_and_claims_nothing_new(workers, chaos_db, handler_app):
    w = workers.start(handler_app, grace=10)
    long_job = add(chaos_db, "chaos.sleep", {"first_seconds": 2})
    running_on(chaos_db, long_job)
    w.signal(signal.SIGTERM)
    started = time.monotonic()
    wait_for(lambda: scalar(chaos_db, "SELECT state FROM job_workers") == "draining",
             message="the worker to report draining")
    newcomer = add(chaos_db, "chaos.quick")  # a free slot, and yet it must not be claimed

    assert w.proc.wait(timeout=15) == 0
    assert time.monotonic() - started < 10
    row = job_row(chaos_db, long_job)
    assert (row["status"], row["attempts"]) == ("completed", 1)
    row = job_row(chaos_db, newcomer)
    assert (row["status"], row["attempts"]) == ("pending", 0)
    assert outcomes(chaos_db, newcomer) == []
    assert scalar(chaos_db, "SELECT state FROM job_workers") == "stopped"


def test_sigterm_hands_an_unfinished_job_back_when_the_grace_period_ends(
        workers, chaos_db, handler_app):
    w = workers.start(handler_app, grace=1)
    job_id = add(chaos_db, "chaos.sleep", {"first_seconds": 120, "seconds": 0.1})
    running_on(chaos_db, job_id)
    w.signal(signal.SIGTERM)
    started = time.monotonic()
    assert w.proc.wait(timeout=15) == 0
    assert time.monotonic() - started < 1 + 3  # the grace period, plus process exit

    row = job_row(chaos_db, job_id)
    # Back at once (no waiting for the lease), and the interrupted attempt is not counted.
    assert (row["status"], row["attempts"], row["in_future"]) == ("pending", 0, False)
    assert outcomes(chaos_db, job_id) == ["handed_back"]

    workers.start(handler_app)
    row = settle(chaos_db, job_id)
    assert (row["status"], row["attempts"]) == ("completed", 1)
    assert outcomes(chaos_db, job_id) == ["handed_back", "completed"]


def test_a_second_signal_stops_the_worker_at_once(workers, chaos_db, handler_app):
    w = workers.start(handler_app, grace=60)
    job_id = add(chaos_db, "chaos.sleep", {"first_seconds": 120})
    running_on(chaos_db, job_id)
    w.signal(signal.SIGTERM)
    wait_for(lambda: w.logged("draining"), message="the first signal to start the drain")
    w.signal(signal.SIGINT)
    started = time.monotonic()
    w.proc.wait(timeout=15)
    assert time.monotonic() - started < 3
    row = job_row(chaos_db, job_id)
    assert (row["status"], row["attempts"]) == ("pending", 0)
    assert outcomes(chaos_db, job_id) == ["handed_back"]


def test_a_signal_taken_by_another_thread_still_drains_the_worker(
        workers, chaos_db, handler_app):
    """The kernel gives a signal sent to a process to any one of its threads, and Python
    runs the handler on the main thread only. `kill` on a thread's id hands the signal to
    that thread, as the kernel does on its own now and then (a bench run saw it once in
    five stops): the worker must drain and exit all the same."""
    # A poll far longer than the test's wait: nothing but the signal may end the sleep.
    w = workers.start(handler_app, grace=10, poll_interval=30)
    job_id = add(chaos_db, "chaos.quick")
    settle(chaos_db, job_id)  # started, claimed, finished: every thread is up
    others = [int(tid) for tid in os.listdir(f"/proc/{w.pid}/task") if int(tid) != w.pid]
    assert others, "the worker runs threads besides its main one"
    os.kill(max(others), signal.SIGTERM)
    started = time.monotonic()
    assert w.proc.wait(timeout=15) == 0
    assert time.monotonic() - started < 5  # not the 30 s poll, nor never
    assert w.logged("draining")
    assert scalar(chaos_db, "SELECT state FROM job_workers") == "stopped"


def test_sigterm_hands_back_hundreds_of_claimed_jobs_in_one_go(workers, chaos_db):
    """At the default batches a worker of quick jobs holds up to 2,000 claimed jobs. On
    SIGTERM the ones it never started go back to pending at once, the running ones after
    the grace period, none with its attempt spent, none left running, none lost."""
    a, _warm, slow = holding_claims(workers, chaos_db, grace=1)
    a.signal(signal.SIGTERM)
    assert a.proc.wait(timeout=30) == 0
    assert scalar(chaos_db, "SELECT count(*) FROM background_jobs WHERE id = ANY(%s) "
                            "AND status = 'pending' AND attempts = 0", [slow]) == len(slow)
    # Every claim it made of them is recorded as handed back, the started ones too.
    claimed = scalar(chaos_db, "SELECT count(*) FROM job_executions_all WHERE job_id = ANY(%s)",
                     [slow])
    assert claimed > 500
    assert scalar(chaos_db, "SELECT count(*) FROM job_executions_all WHERE job_id = ANY(%s) "
                            "AND outcome = 'handed_back'", [slow]) == claimed
    assert scalar(chaos_db, "SELECT count(*) FROM chaos_orders") == 0  # none ran to its end
