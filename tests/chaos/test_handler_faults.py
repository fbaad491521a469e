"""Hostile handlers against real worker processes (tests/apps/handler_faults_app.py).

A handler that raises what is not an Exception (SystemExit, KeyboardInterrupt,
GeneratorExit, a BaseException of its own) or stops its lane's event loop fails its own
job with HANDLER_ABORTED; no slot thread, producer or loop dies of it, the jobs beside it
complete and the worker goes on claiming. A worker whose own thread dies exits non-zero.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.apps.handler_faults_app import QUEUE
from tests.chaos.support import events, settle
from tests.helpers import executions, wait_for
from worker import enqueue
from worker.core import errors as E

pytestmark = pytest.mark.chaos

APP = "tests.apps.handler_faults_app"
KINDS = ["SystemExit", "KeyboardInterrupt", "custom", "GeneratorExit"]


def add(url: str, type_: str, payload: dict | None = None) -> int:
    with psycopg.connect(url) as conn:
        job_id = enqueue(conn, type_, payload or {}, queue=QUEUE)
        conn.commit()
    return job_id


def started(url: str, job_id: int) -> bool:
    return any(e[2] in ("started", "start") for e in events(url, job_id))


def spans(url: str, job_ids: list[int]) -> list[tuple]:
    """(start, end) of each job's handler, by the database's clock, in start order."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT min(at) FILTER (WHERE event = 'start'), min(at) FILTER (WHERE event = "
            "'end') FROM chaos_events WHERE job_id = ANY(%s) GROUP BY job_id ORDER BY 1",
            [job_ids]).fetchall()


@pytest.mark.parametrize("handler", ["thread", "coroutine"])
def test_a_handler_raising_a_base_exception_fails_its_job_and_nothing_else(
        workers, chaos_db, handler):
    """Each kind, raised while innocent jobs of the same lane run beside it: the job
    fails with HANDLER_ABORTED, the others complete, the worker keeps claiming."""
    w = workers.start(APP, concurrency=3, grace=1)
    kinds = KINDS + (["loop_stop"] if handler == "coroutine" else [])
    steady = "faults.steady" if handler == "coroutine" else "faults.tsteady"
    raising = "faults.araise" if handler == "coroutine" else "faults.raise"
    for kind in kinds:
        beside = [add(chaos_db, steady, {"seconds": 0.5}) for _ in range(2)]
        wait_for(lambda ids=beside: all(started(chaos_db, j) for j in ids),
                 message="the innocent jobs to start")
        bad = add(chaos_db, raising, {"kind": kind})
        row = settle(chaos_db, bad)
        assert (row["status"], row["last_error_code"]) == ("failed", E.HANDLER_ABORTED), kind
        (execution,) = executions(chaos_db, bad)
        assert execution["outcome"] == "failed" and execution["traceback"], kind
        for j in beside:
            assert settle(chaos_db, j)["status"] == "completed", kind
        assert w.alive(), kind
    # The lane still has all its slots and its loop: three at once still run together.
    after = [add(chaos_db, steady, {"seconds": 1.5}) for _ in range(3)]
    for j in after:
        assert settle(chaos_db, j)["status"] == "completed"
    starts_ends = spans(chaos_db, after)
    assert max(s for s, _ in starts_ends) < min(e for _, e in starts_ends)
    assert w.alive()


@pytest.mark.parametrize("thread", ["slot", "heartbeat"])
def test_a_worker_whose_own_thread_dies_exits_non_zero(workers, chaos_db, thread):
    """SystemExit in the worker's own code on one of its threads (a patch in
    tests/apps/thread_death_app.py): the worker stops and says it failed."""
    w = workers.start("tests.apps.thread_death_app", concurrency=2, grace=1)
    before = add(chaos_db, "faults.tsteady", {"seconds": 0})
    assert settle(chaos_db, before)["status"] == "completed"
    add(chaos_db, "faults.kill_thread", {"thread": thread})
    wait_for(lambda: not w.alive(), timeout=30, message="the worker to stop")
    assert w.proc.returncode not in (0, None)
    assert w.logged("died (SystemExit): stopping the worker")
