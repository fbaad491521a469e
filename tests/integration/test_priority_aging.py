"""Priorities age: higher priority first, but a waiting job's effective priority rises
with its wait (one level per AGING seconds), so a low-priority job starts within a bounded
time however many higher-priority jobs keep arriving. The claim orders by
jobwarden_claim_rank(available_at, priority) = available_at - priority * AGING."""

from __future__ import annotations

import signal
from datetime import timedelta

import psycopg
from psycopg.rows import dict_row

from jobwarden import JobSpec, enqueue, enqueue_many
from jobwarden.worker.engine.producer import claim_params
from jobwarden.worker.store.queries import Q
from tests.helpers import scalar, wait_for
from tests.integration.test_claim_race import start_worker

#: Seconds of waiting worth one priority level: the step of jobwarden_claim_rank.
AGING = 10.0
#: Priority-1 jobs waiting when the stream starts; it then feeds itself (aging_app).
STREAM = 40


def claim(conn, limit: int) -> list[int]:
    rows = conn.execute(Q.claim_jobs, claim_params(
        types=["aging.work"], leases=[30.0], limits=[1], type_queues=["default"],
        type_max_attempts=[5], queues=None, limit=limit, worker_id="aging-test")).fetchall()
    conn.commit()
    return [r[0] for r in rows]


def test_one_priority_level_is_worth_aging_seconds_of_waiting(conn):
    step = conn.execute("SELECT extract(epoch FROM jobwarden_claim_rank(now(), 0) "
                        "- jobwarden_claim_rank(now(), 1))").fetchone()[0]
    assert step == AGING


def test_the_claim_orders_by_priority_and_wait_together(conn, clean_db):
    base = conn.execute("SELECT now()").fetchone()[0]
    at = {  # name: (priority, seconds before base it became available)
        "low, waited 100 s": (0, 100),
        "one level up, 5 s later": (1, 95),  # 10 s of head start: still ahead
        "one level up, 15 s later": (1, 85),  # more than 10 s later: behind the low job
        "one level down, 11 s earlier": (-1, 111),  # waited long enough: ahead
        "same instant, priority 3": (3, 50),
        "same instant, priority 2": (2, 50),  # same instant: the higher priority first
    }
    ids = enqueue_many(conn, [
        JobSpec("aging.work", {"job": name}, priority=p, run_at=base - timedelta(seconds=s))
        for name, (p, s) in at.items()])
    # Scheduled in the future with a head start that would put it first: not runnable, so
    # the claim walks past it.
    future = enqueue(conn, "aging.work", {}, priority=1000, delay=60)
    conn.commit()
    order = dict(zip(ids, at, strict=True))
    assert [order[i] for i in claim(conn, limit=10)] == [
        "one level up, 5 s later",  # rank base - 105 s
        "one level down, 11 s earlier",  # base - 101 s
        "low, waited 100 s",  # base - 100 s
        "one level up, 15 s later",
        "same instant, priority 3",
        "same instant, priority 2",
    ]
    assert scalar(clean_db, "SELECT status FROM background_jobs WHERE id = %s",
                  [future]) == "pending"


def test_a_low_priority_job_starts_within_the_bound_under_a_stream_of_higher_ones(
        conn, clean_db):
    conn.execute("DROP TABLE IF EXISTS aging_stream")
    conn.execute("CREATE TABLE aging_stream (running boolean NOT NULL)")
    conn.execute("INSERT INTO aging_stream VALUES (true)")
    enqueue_many(conn, [JobSpec("aging.work", {"n": n}, priority=1) for n in range(STREAM)])
    conn.commit()
    worker = start_worker("tests.apps.aging_app", "--concurrency", "2", "--buffer", "2")
    try:
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM job_executions"),
                 message="the worker to start on the stream")
        low = enqueue(conn, "aging.work", {"low": True}, priority=0)
        conn.commit()
        # Under strict priorities this would time out: the stream never runs dry. (Until
        # it has completed, a stop would hand it back and move its available_at.)
        wait_for(lambda: scalar(clean_db, "SELECT status = 'completed' FROM background_jobs "
                                          "WHERE id = %s", [low]),
                 timeout=120, message="the low-priority job to run")
    finally:
        conn.execute("UPDATE aging_stream SET running = false")
        conn.commit()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, worker.stderr.read().decode()[-2000:]

    with psycopg.connect(clean_db, row_factory=dict_row) as c:
        seen = c.execute("""
            SELECT j.id, j.priority,
                   extract(epoch FROM j.available_at - l.available_at) AS after_low,
                   e.started_at < l.started_at AS started_before_low,
                   j.available_at <= l.started_at
                       AND (e.started_at IS NULL OR e.started_at > l.started_at)
                       AS waiting_when_low_started,
                   j.available_at BETWEEN l.available_at AND l.started_at AS arrived_meanwhile,
                   e.started_at BETWEEN l.available_at AND l.started_at AS started_meanwhile
            FROM background_jobs j
            LEFT JOIN job_executions e ON e.job_id = j.id
            CROSS JOIN (SELECT j.available_at, e.started_at FROM background_jobs j
                        JOIN job_executions e ON e.job_id = j.id
                        WHERE j.id = %(low)s) l
            WHERE j.id <> %(low)s""", {"low": low}).fetchall()
        wait = c.execute("SELECT extract(epoch FROM e.started_at - j.available_at) "
                         "FROM background_jobs j JOIN job_executions e ON e.job_id = j.id "
                         "WHERE j.id = %s", [low]).fetchone()["extract"]
    before = [r for r in seen if r["started_before_low"]]
    assert {r["priority"] for r in seen} == {1}
    # The stream outran the worker while the low job waited, so under strict priorities
    # it would never have started; it did, ahead of higher-priority jobs still waiting.
    assert (sum(r["arrived_meanwhile"] for r in seen)
            > sum(bool(r["started_meanwhile"]) for r in seen))
    assert any(r["waiting_when_low_started"] for r in seen)
    # The bound: every higher-priority job that went first became available less than
    # (1 - 0) * AGING seconds after the low job, and the stream did send such jobs.
    assert before
    assert max(r["after_low"] for r in before) < AGING
    assert any(r["after_low"] > 0 for r in before)
    print(f"low-priority job waited {wait:.2f} s; {len(before)} higher-priority jobs went "
          f"first, {sum(r['waiting_when_low_started'] for r in seen)} were still waiting")
