"""An idle lane's claimed thread-handler job starts on the producer thread that claimed
it, which passes the claiming to its other thread (worker/engine/producer.py, "Running the
first job"). The poll interval is long here: only a notification read by whichever
thread holds the claiming can start the second job while the first one runs."""

from __future__ import annotations

import threading
import time

from jobwarden import enqueue, job
from tests.helpers import job_row, running_worker, wait_for

#: Long enough that no poll claims during a test: every claim follows a notification.
POLL = 60.0


def test_the_claiming_thread_runs_the_job_and_the_other_one_claims_the_next(
        default_registry, conn, clean_db):
    threads: dict[int, str] = {}
    release = threading.Event()

    @job("first.hold", registry=default_registry)
    def hold(ctx, payload):
        threads[payload["i"]] = threading.current_thread().name
        if payload["i"] == 0:
            release.wait(30)

    with running_worker(default_registry, clean_db, concurrency=2,
                        poll_interval=POLL) as worker:
        # Only once its other thread waits to take the claiming over does the claiming
        # thread run a job itself: a job enqueued before that (a loaded machine can be
        # slow to start the second thread) goes to a slot, as it should.
        producer = worker._lanes[0].producer
        wait_for(lambda: producer._standby == 1, message="the second claiming thread to wait")
        first = enqueue(conn, "first.hold", {"i": 0})
        conn.commit()
        wait_for(lambda: 0 in threads, message="the first job to start")
        # The thread that claimed it is in its handler now; the notification of the next
        # job reaches the other thread, which claims it (no poll would, for a minute).
        second = enqueue(conn, "first.hold", {"i": 1})
        conn.commit()
        wait_for(lambda: 1 in threads, message="the second job to start while the first runs")
        release.set()
        wait_for(lambda: job_row(clean_db, first)["status"] == "completed"
                 and job_row(clean_db, second)["status"] == "completed",
                 message="both jobs to complete")
    assert threads[0].startswith("producer-*."), threads
    # With the first claiming thread busy, nobody waits to take the claiming over: the
    # second job went to the buffer and a slot thread.
    assert threads[1].startswith("slot-"), threads


def test_a_job_the_producer_runs_holds_one_of_the_lanes_slots(default_registry, conn,
                                                               clean_db):
    """With one slot, taken by the job the producer runs, the next job waits for it."""
    started: list[int] = []
    release = threading.Event()

    @job("first.one_slot", registry=default_registry)
    def one(ctx, payload):
        started.append(payload["i"])
        if payload["i"] == 0:
            release.wait(30)

    with running_worker(default_registry, clean_db, concurrency=1, poll_interval=POLL):
        first = enqueue(conn, "first.one_slot", {"i": 0})
        conn.commit()
        wait_for(lambda: started == [0], message="the first job to start")
        second = enqueue(conn, "first.one_slot", {"i": 1})
        conn.commit()
        # Its notification wakes the claiming thread, which finds no free slot and
        # leaves it pending: it must not start in this window.
        time.sleep(0.5)
        assert started == [0] and job_row(clean_db, second)["status"] == "pending"
        release.set()
        wait_for(lambda: job_row(clean_db, second)["status"] == "completed",
                 message="the second job to run once the slot is free")
    assert started == [0, 1]
    assert job_row(clean_db, first)["status"] == "completed"
