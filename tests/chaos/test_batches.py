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

Members: CHAOS_BATCH_MEMBERS (800 by default, about 1,200 jobs in all: a fan-in long
enough for ten kills, each made as soon as its victim and another worker run members);
by hand, CHAOS_BATCH_MEMBERS=10000 for the fan-in of 10,000.
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

MEMBERS = int(os.environ.get("CHAOS_BATCH_MEMBERS", "800"))
FAILING = range(0, MEMBERS, 100)  # every 100th member of the first batch fails for good
SECOND = MEMBERS // 4             # the second batch: all succeed, one member fans out
FAN_OUT = MEMBERS // 4
#: Members spread over queues: two finishes of one queue and type (and outcome) meet at
#: the rollup's row first, and would reach their batch's one after the other.
QUEUES = 4
#: How long the fan-in may take once the faults are over.
SETTLE = max(120.0, MEMBERS / 25)
#: Workers killed during the fan-in, of a pool of this many.
KILLS = 10
POOL = 4

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
    # Two jobs claimed at a time and none buffered: the members spread over the workers,
    # and a kill loses a few of them where a buffer of 400 would lose most of the fan-in
    # to a 2 s lease each time.
    return workers.start("tests.apps.batch_app", concurrency=2, poll_interval=0.05,
                         options=("--claim-batch", "2", "--buffer", "0"))


def progress(conn) -> tuple[dict[int, int], bool, float]:
    """Jobs running by worker process; whether a member is left to run; the share of the
    batches' members that have ended."""
    running = dict(conn.execute(
        "SELECT w.pid, count(*) FROM background_jobs j "
        "JOIN job_workers w ON w.worker_id = j.worker_id "
        "WHERE j.status = 'running' GROUP BY w.pid").fetchall())
    left, share = conn.execute(
        "SELECT count(*) FILTER (WHERE status IN ('pending', 'running')) > 0, "
        "avg((status IN ('completed', 'failed'))::int) "
        "FROM background_jobs WHERE batch_id IS NOT NULL").fetchone()
    return running, left, float(share)


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
    # Workers killed one after the other all through the fan-in, each while it runs
    # members and while another worker runs some too (which keeps the fan-in going): the
    # k-th kill once k tenths of nine tenths of the members have ended, the oldest busy
    # worker its victim, and a new worker started in its place.
    pool = [start(workers) for _ in range(POOL)]
    kills, deadline = 0, time.monotonic() + SETTLE
    with psycopg.connect(chaos_db, autocommit=True) as conn:
        while kills < KILLS:
            running, left, share = progress(conn)
            if not left:
                break  # the fan-in is over before the last kill: it proves nothing more
            busy = [w for w in pool if running.get(w.pid)]
            if share >= 0.9 * kills / KILLS and len(busy) >= 2:
                busy[0].kill()
                pool.remove(busy[0])
                pool.append(start(workers))
                kills += 1
                continue
            assert time.monotonic() < deadline, "the workers ran no members"
            time.sleep(0.02)
    wait_for(lambda: settled(chaos_db), timeout=SETTLE, interval=0.2,
             message="every member and callback to end")
    with psycopg.connect(chaos_db) as conn:
        lost = conn.execute("SELECT count(*) FROM job_executions "
                            "WHERE outcome = 'worker_lost'").fetchone()[0]
    print(f"{MEMBERS} members: settled {time.monotonic() - started:.1f}s after the first "
          f"start, {kills} kills while their victims ran members; {lost} executions lost "
          f"to them")
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
