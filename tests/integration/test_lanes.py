"""Queues with slots of their own (`--queues email=2,reports=1`), in real worker processes.

The handlers (tests/apps/lanes_app.py) record when they really ran; `job_executions`
opens at the claim, and a claimed job may still wait in its lane's buffer. Gated jobs
hold their slots until the test opens the gate, so "a lane is full" is a state the test
sets up and keeps, not a matter of timing.
"""

from __future__ import annotations

import signal
import threading

import pytest

from jobwarden import JobSpec, Registry, enqueue_many, job
from jobwarden.worker.process import WorkerProcess
from tests.apps.lanes_app import LEASE
from tests.helpers import running_worker, scalar, status_counts, wait_for
from tests.integration.test_claim_race import start_worker

#: The most handlers of `queue` that ran at one moment (at some handler's start).
MOST_AT_ONCE = """
    SELECT coalesce(max(n), 0) FROM (
        SELECT a.job_id, count(*) AS n FROM lane_runs a JOIN lane_runs b
          ON b.queue = ANY(%(queues)s) AND b.started <= a.started
         AND (b.finished IS NULL OR b.finished > a.started)
        WHERE a.queue = ANY(%(queues)s) GROUP BY a.job_id) AS at_start
"""


@pytest.fixture
def lanes_db(conn, clean_db):
    conn.execute("DROP TABLE IF EXISTS lane_runs, lane_gate")
    conn.execute("CREATE TABLE lane_runs (job_id bigint, queue text, started timestamptz, "
                 "finished timestamptz)")
    conn.execute("CREATE TABLE lane_gate (open bool)")
    conn.execute("INSERT INTO lane_gate VALUES (false)")
    conn.commit()
    procs = []

    def start(*args):
        procs.append(start_worker("tests.apps.lanes_app", *args))
        return procs[-1]

    yield conn, start
    open_gate(conn)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        assert p.wait(timeout=30) == 0, p.stderr.read().decode()[-2000:]


def enqueue(conn, queue: str, n: int, gated: bool = False) -> None:
    enqueue_many(conn, [JobSpec(f"{queue}.work", {"gated": gated}) for _ in range(n)])
    conn.commit()


def open_gate(conn) -> None:
    conn.execute("UPDATE lane_gate SET open = true")
    conn.commit()


def started(url: str, queue: str) -> int:
    return scalar(url, "SELECT count(*) FROM lane_runs WHERE queue = %s", [queue])


def completed(url: str, queue: str) -> int:
    return scalar(url, "SELECT count(*) FROM background_jobs WHERE queue = %s "
                       "AND status = 'completed'", [queue])


def most_at_once(url: str, *queues: str) -> int:
    return scalar(url, MOST_AT_ONCE, {"queues": list(queues)})


def test_a_flood_of_reports_never_takes_the_email_slots(lanes_db, clean_db):
    conn, start = lanes_db
    start("--queues", "email=2,reports=1")
    enqueue(conn, "reports", 5, gated=True)  # more than its one slot, each holding it
    wait_for(lambda: started(clean_db, "reports") == 1, message="a report to start")
    enqueue(conn, "email", 6)
    wait_for(lambda: completed(clean_db, "email") == 6, message="every email to complete "
             "while the reports slot is busy")
    assert started(clean_db, "reports") == 1 and completed(clean_db, "reports") == 0
    # Hold on until an unrenewed lease would long have been recovered: the heartbeat
    # renews the running report and the ones claimed into the reports lane's buffer.
    wait_for(lambda: scalar(clean_db, "SELECT bool_and(heartbeat_at > started_at "
                                      "+ make_interval(secs => %s)) FROM background_jobs "
                                      "WHERE status = 'running'", [3 * LEASE]),
             message="leases renewed for three lease periods")
    open_gate(conn)
    wait_for(lambda: status_counts(clean_db) == {"completed": 11}, timeout=60,
             message="the reports to complete")
    assert most_at_once(clean_db, "reports") == 1
    assert most_at_once(clean_db, "email") <= 2
    assert scalar(clean_db, "SELECT count(*) FROM job_executions "
                            "WHERE outcome IS DISTINCT FROM 'completed'") == 0
    # Every email finished before the first report did.
    assert scalar(clean_db, "SELECT max(finished) FILTER (WHERE queue = 'email') "
                            "< min(finished) FILTER (WHERE queue = 'reports') FROM lane_runs")


def test_plain_names_share_the_concurrency_beside_a_lane_of_its_own(lanes_db, clean_db):
    conn, start = lanes_db
    start("--queues", "email=1,default,other", "--concurrency", "2")
    enqueue(conn, "default", 2, gated=True)
    wait_for(lambda: started(clean_db, "default") == 2, message="both shared slots busy")
    enqueue(conn, "other", 1)
    enqueue(conn, "email", 3)
    wait_for(lambda: completed(clean_db, "email") == 3, message="the emails to complete")
    assert started(clean_db, "other") == 0  # its lane's two slots are both taken
    assert conn.execute("SELECT queues, lanes, concurrency FROM job_workers").fetchone() == (
        ["email", "default", "other"],
        [{"queues": ["email"], "slots": 1, "shared": False},
         {"queues": ["default", "other"], "slots": 2, "shared": True}], 3)
    conn.rollback()
    open_gate(conn)
    wait_for(lambda: status_counts(clean_db) == {"completed": 6}, timeout=60,
             message="every job to complete")
    assert most_at_once(clean_db, "default", "other") == 2
    assert most_at_once(clean_db, "email") == 1
    assert scalar(clean_db, "SELECT min(finished) FILTER (WHERE queue = 'default') "
                            "<= min(started) FILTER (WHERE queue = 'other') FROM lane_runs")


def test_star_serves_every_other_queue_and_sigterm_hands_back_every_lane(lanes_db, clean_db):
    conn, start = lanes_db
    worker = start("--queues", "reports=1,*", "--concurrency", "2", "--grace", "0.5")
    enqueue(conn, "reports", 3, gated=True)
    wait_for(lambda: started(clean_db, "reports") == 1, message="a report to start")
    enqueue(conn, "default", 1)
    wait_for(lambda: completed(clean_db, "default") == 1, message="a default job to run")
    assert started(clean_db, "reports") == 1  # the `*` lane had free slots and left them
    enqueue(conn, "other", 3, gated=True)
    wait_for(lambda: started(clean_db, "other") == 2, message="both `*` slots busy")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.stderr.read().decode()[-2000:]
    # Running and buffered jobs of both lanes went back to pending, no attempt spent.
    assert status_counts(clean_db) == {"completed": 1, "pending": 6}
    assert scalar(clean_db, "SELECT max(attempts) FROM background_jobs "
                            "WHERE status = 'pending'") == 0
    assert scalar(clean_db, "SELECT queues FROM job_workers") == ["reports", "*"]


def test_the_python_api_takes_the_dict_form_and_refuses_a_bad_spec(conn, clean_db):
    reg = Registry()
    gate, ran = threading.Event(), []

    @job("slow.t", queue="slow", registry=reg)
    def slow(ctx, payload):
        ran.append("slow")
        gate.wait(30)

    @job("fast.t", queue="fast", registry=reg)
    def fast(ctx, payload):
        ran.append("fast")

    with pytest.raises(ValueError, match="slow: slots must be from 1 to 1000, not 0"):
        WorkerProcess(reg, url=clean_db, queues={"slow": 0})
    enqueue_many(conn, [JobSpec("slow.t", {}) for _ in range(3)], registry=reg)
    conn.commit()
    try:
        with running_worker(reg, clean_db, queues={"slow": 1, "fast": 2}) as worker:
            assert worker.concurrency == 3 and worker.queues == ["slow", "fast"]
            wait_for(lambda: ran.count("slow") == 1, message="a slow job to start")
            enqueue_many(conn, [JobSpec("fast.t", {}) for _ in range(4)], registry=reg)
            conn.commit()
            wait_for(lambda: completed(clean_db, "fast") == 4, message="the fast jobs")
            assert ran.count("slow") == 1
            gate.set()
            wait_for(lambda: completed(clean_db, "slow") == 3, message="the slow jobs")
    finally:
        gate.set()


def test_a_lane_whose_producer_fails_stops_the_worker_with_exit_status_1(conn, clean_db):
    reg = Registry()

    @job("a.t", queue="a", registry=reg)
    def handler(ctx, payload):
        pass

    class BrokenSecondLane(WorkerProcess):
        def _lane_runtime(self, lane):
            rt = super()._lane_runtime(lane)
            if lane.queues == ("b",):
                def run():
                    raise RuntimeError("a bug in the claim loop")
                rt.producer.run = run
            return rt

    worker = BrokenSecondLane(reg, url=clean_db, queues="a=1,b=1", poll_interval=0.1, grace=1)
    result = []
    thread = threading.Thread(target=lambda: result.append(worker.run()), daemon=True)
    thread.start()  # not on the main thread: run() would take over the test's signals
    thread.join(timeout=30)
    assert result == [1]  # the failed lane stopped the whole worker
    assert scalar(clean_db, "SELECT state FROM job_workers") == "stopped"


# A job claimed ahead waits in that worker's buffer for one of its slots, holding a lease,
# while another worker may be idle: worth it for millisecond jobs, never for long ones,
# nor before the worker has seen how long its jobs take.
RUNNING = "SELECT count(*) FROM background_jobs WHERE status = 'running'"
BEAT = "SELECT max(heartbeat_at) FROM job_workers WHERE stopped_at IS NULL"


def test_long_jobs_are_claimed_only_for_free_slots(lanes_db, clean_db):
    conn, start = lanes_db
    start("--concurrency", "2")
    enqueue(conn, "default", 5, gated=True)
    wait_for(lambda: started(clean_db, "default") == 2, message="both slots busy")
    # Two heartbeats later the producer (polling every 0.2 s) has had several chances
    # to claim more; with both slots held it must not have.
    for _ in range(2):
        beat = scalar(clean_db, BEAT)
        wait_for(lambda b=beat: scalar(clean_db, BEAT) > b, message="a worker heartbeat")
    assert scalar(clean_db, RUNNING) == 2
    assert started(clean_db, "default") == 2

    open_gate(conn)
    wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                      "WHERE status = 'completed'") == 5,
             message="every job completed")
    assert scalar(clean_db, "SELECT max(attempts) FROM background_jobs") == 1
