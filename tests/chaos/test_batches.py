"""Batches under kill -9 and a PostgreSQL restart: every callback enqueued once.

Two batches fan in while real worker processes are killed with SIGKILL again and again
(inside claims, handlers, the finish statements and the counts that go with them, a
fan-out member's business transaction), or while the private PostgreSQL cluster is
stopped abruptly and started again. One batch has members that fail for good, the
other a member that adds members from its handler's transaction. The oracle: the
callback jobs in background_jobs (each (batch, event) exactly once, none that should
not be), the runs the callbacks recorded (tests/apps/batch_app.py), and the members'
final statuses, against which the counts each callback carried and each batch holds
are checked.

Members: CHAOS_BATCH_MEMBERS (2,000 by default, about 2,900 jobs in all); by hand,
CHAOS_BATCH_MEMBERS=10000 for the fan-in of 10,000.
"""

from __future__ import annotations

import os
import time

import psycopg
import pytest

from jobwarden import JobSpec, open_batch
from tests.apps import batch_app
from tests.chaos.conftest import deadline_passed
from tests.helpers import wait_for

pytestmark = pytest.mark.chaos

MEMBERS = int(os.environ.get("CHAOS_BATCH_MEMBERS", "2000"))
FAILING = range(0, MEMBERS, 200)  # every 200th member of the first batch fails for good
SECOND = MEMBERS // 4             # the second batch: all succeed, one member fans out
FAN_OUT = MEMBERS // 4
#: Members spread over queues: two finishes of one queue and type (and outcome) meet at
#: the rollup's row first, and would reach their batch's one after the other.
QUEUES = 4
#: How long the fan-in may take once the faults are over.
SETTLE = max(120.0, MEMBERS / 25)
#: At most this many rounds of kills (each under a second).
KILL_ROUNDS_MAX = 200

CALLBACKS = {f"on_{event}": JobSpec("batch.callback", {}) for event in
             ("complete", "success", "failure")}


def open_batches(url: str) -> tuple[int, int]:
    with psycopg.connect(url) as conn:
        batch_app.create_tables(conn)
        with open_batch(conn, description="with failures", owner="chaos:1", **CALLBACKS) as a:
            a.enqueue_many([JobSpec("batch.member", {"n": n, "fail": n in FAILING},
                                    queue=f"b{n % QUEUES}") for n in range(MEMBERS)])
        with open_batch(conn, description="fans out", owner="chaos:2", **CALLBACKS) as b:
            b.enqueue_many([JobSpec("batch.member", {"n": n}, queue=f"b{n % QUEUES}")
                            for n in range(SECOND)]
                           + [JobSpec("batch.fan", {batch_app.FAN_OUT: FAN_OUT})])
        conn.commit()
    return a.id, b.id


def start(workers):
    return workers.start("tests.apps.batch_app", concurrency=8, poll_interval=0.05)


def running_on(url: str, pid: int, within: float) -> bool:
    """Whether the worker process `pid` runs a job, waited for up to `within` seconds."""
    deadline = time.monotonic() + within
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            if conn.execute("SELECT EXISTS (SELECT 1 FROM background_jobs j "
                            "JOIN job_workers w ON w.worker_id = j.worker_id "
                            "WHERE j.status = 'running' AND w.pid = %s)", [pid]).fetchone()[0]:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def ended(url: str) -> float:
    """The share of the batches' members that have ended."""
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT avg((status IN ('completed', 'failed'))::int) "
                            "FROM background_jobs WHERE batch_id IS NOT NULL").fetchone()[0]


def settled(url: str) -> bool:
    """Every job (members and callbacks) has ended, and the callbacks came."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT bool_and(status IN ('completed', 'failed')) AND count(*) FILTER "
            "(WHERE type = 'batch.callback') = 4 FROM background_jobs").fetchone()[0]


def check_the_oracle(url: str, first: int, second: int) -> None:
    with psycopg.connect(url) as conn:
        enqueued = conn.execute(
            "SELECT (payload #>> '{batch,id}')::bigint, payload #>> '{batch,event}', count(*) "
            "FROM background_jobs WHERE type = 'batch.callback' GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        assert enqueued == [(first, "complete", 1), (first, "failure", 1),
                            (second, "complete", 1), (second, "success", 1)]
        # Each callback ran (at least once: a killed run is run again) with what it was
        # given, and nothing else ran as one.
        ran = conn.execute("SELECT DISTINCT c.job_id FROM batch_callback_runs c "
                           "JOIN background_jobs j ON j.id = c.job_id "
                           "WHERE j.type = 'batch.callback'").fetchall()
        assert len(ran) == 4
        truth = {bid: dict(members=m, completed=c, failed=f) for bid, m, c, f in conn.execute(
            "SELECT batch_id, count(*), count(*) FILTER (WHERE status = 'completed'), "
            "count(*) FILTER (WHERE status = 'failed') FROM background_jobs "
            "WHERE batch_id IS NOT NULL GROUP BY batch_id").fetchall()}
        assert truth == {first: dict(members=MEMBERS, completed=MEMBERS - len(FAILING),
                                     failed=len(FAILING)),
                         second: dict(members=SECOND + 1 + FAN_OUT,
                                      completed=SECOND + 1 + FAN_OUT, failed=0)}
        held = {bid: dict(members=m, completed=c, failed=f) for bid, m, c, f in conn.execute(
            "SELECT id, members, completed, failed FROM job_batches").fetchall()}
        assert held == truth
        for (bid, event, payload) in conn.execute(
                "SELECT DISTINCT ON (job_id) batch_id, event, payload FROM batch_callback_runs "
                "ORDER BY job_id").fetchall():
            counts = payload["batch"]
            if event == "failure":  # the first failure: one, the rest still under way
                assert counts["failed"] >= 1
                continue
            assert {k: counts[k] for k in ("members", "completed", "failed")} == truth[bid]
            assert counts["cancelled"] == counts["skipped"] == counts["unknown"] == 0
        assert conn.execute("SELECT count(*) FROM background_jobs WHERE batch_id IS NOT NULL "
                            "AND batch_counted IS DISTINCT FROM status").fetchone()[0] == 0


def test_every_callback_is_enqueued_once_under_kill_9(workers, chaos_db, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_DUTY_INTERVAL", "0.5")  # recovery and repair, quickly
    first, second = open_batches(chaos_db)
    started = time.monotonic()
    # Two workers; all through the fan-in one of them is killed and replaced, in turn, at
    # moments that drift (ten rounds at least, then until nine tenths of the members
    # have ended): the other has usually warmed up and is working when it happens.
    pair = [start(workers) for _ in range(2)]
    for kill in range(KILL_ROUNDS_MAX):
        if kill >= 10 and ended(chaos_db) >= 0.9:
            break
        time.sleep(0.6 + 0.25 * (kill % 4))
        # Killed while it runs a member, when there is one to run: a worker still starting
        # (slow on a busy machine) has claimed nothing, and its kill would prove nothing.
        running_on(chaos_db, pair[kill % 2].pid, within=10.0)
        pair[kill % 2].kill()
        pair[kill % 2] = start(workers)
    wait_for(lambda: settled(chaos_db), timeout=SETTLE, interval=0.5,
             message="every member and callback to end")
    with psycopg.connect(chaos_db) as conn:
        lost = conn.execute("SELECT count(*) FROM job_executions "
                            "WHERE outcome = 'worker_lost'").fetchone()[0]
    print(f"{MEMBERS} members: settled {time.monotonic() - started:.1f}s after the first "
          f"start, {kill + 1} rounds of kills; {lost} executions lost to them")
    assert lost > 0, "no kill landed while jobs ran"
    check_the_oracle(chaos_db, first, second)


def test_every_callback_is_enqueued_once_across_a_postgresql_restart(workers,
                                                                      private_cluster):
    url = private_cluster.url
    first, second = open_batches(url)
    pool = [workers.start("tests.apps.batch_app", concurrency=8, url=url) for _ in range(2)]

    def under_way() -> bool:
        with psycopg.connect(url) as conn:
            return conn.execute("SELECT sum(completed) FROM job_batches").fetchone()[0] \
                >= MEMBERS // 5
    wait_for(under_way, timeout=60, message="the fan-in to be well under way")
    private_cluster.stop("immediate")  # a crash: no goodbye to any session
    lease_outlived = deadline_passed(3.0)  # longer than the members' 2 s lease
    wait_for(lambda: lease_outlived() and all(w.logged("failed") or w.logged("lost")
                                              for w in pool), timeout=30,
             message="every worker to notice the outage")
    private_cluster.start()
    wait_for(lambda: settled(url), timeout=SETTLE, interval=0.5,
             message="every member and callback to end after the restart")
    assert all(w.alive() for w in pool), "a worker died with the database"
    check_the_oracle(url, first, second)
