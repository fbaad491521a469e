"""As a coroutine task ends, its loop begins the next coroutine job in its slot itself,
but only one whose lease the clock vouches for (docs/architecture.md §6, "Coroutine
handlers"; worker/engine/executor.py, `_pass_slot_on`): begin() asks the database about
any other, and the loop must never wait on that, so those still go through the slot
thread. Each handler records which thread began its execution.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

from jobwarden import enqueue, job
from jobwarden.worker.core import lease
from jobwarden.worker.engine.executor import Executor
from jobwarden.worker.engine.producer import ClaimedJob, JobBuffer
from tests.helpers import job_row, running_worker, wait_for


def begun_by(worker, execution_id) -> str:
    """The name of the thread that began this execution (begin() records it)."""
    for rt in worker._lanes:
        for ex in rt.executor.running():
            if ex.control.execution_id == execution_id:
                return ex.thread.name
    raise AssertionError(f"execution {execution_id} is not running")


def drain(default_registry, conn, clean_db, *, lease: float, seconds: float, jobs: int):
    began: list[str] = []
    box: dict = {}

    @job("handoff.wait", queue="io", lease=lease, registry=default_registry)
    async def wait(ctx, payload):
        began.append(begun_by(box["worker"], ctx.execution_id))
        await asyncio.sleep(seconds)

    ids = [enqueue(conn, "handoff.wait", {"i": i}) for i in range(jobs)]
    conn.commit()
    with running_worker(default_registry, clean_db, queues="io=2") as worker:
        box["worker"] = worker
        wait_for(lambda: all(job_row(clean_db, i)["status"] == "completed" for i in ids),
                 timeout=60, message=f"{jobs} jobs to complete")
    assert threading.current_thread().name == "MainThread"
    return began


def test_the_loop_begins_the_next_vouched_job_in_the_slot_it_frees(default_registry, conn,
                                                                    clean_db):
    began = drain(default_registry, conn, clean_db, lease=30.0, seconds=0.05, jobs=12)
    assert len(began) == 12
    # The first two come through the slot thread (no task had ended yet); once tasks end,
    # their loop begins what waits behind them.
    assert began[0].startswith("slot-")
    assert any(name.startswith("loop-") for name in began[2:]), began


def test_only_a_coroutine_job_whose_lease_the_clock_vouches_for_is_begun_on_the_loop(
        default_registry):
    """What the loop may take as a task ends: begin() would ask the database about any
    other job, and the loop must never wait on that (the slot thread takes those)."""
    @job("handoff.coroutine", lease=30.0, registry=default_registry)
    async def coroutine(ctx, payload):
        pass

    @job("handoff.thread", lease=30.0, registry=default_registry)
    def thread(ctx, payload):
        pass

    executor = Executor(registry=default_registry, pool=None, buffer=JobBuffer(),
                        completer=None, concurrency=2, on_slot_free=lambda job: None,
                        on_abandoned=lambda: None)

    def claimed(job_type: str, granted_at: float | None) -> ClaimedJob:
        return ClaimedJob(id=1, queue="default", type=job_type, version=1, payload={},
                          priority=0, attempt=1, max_attempts=3, execution_id=uuid.uuid4(),
                          checkpoint=None, idempotency_key=None, snoozes=0,
                          granted_at=granted_at)

    now = lease.now()
    assert executor._begins_on_loop(claimed("handoff.coroutine", now))
    # Past the clock's margin (a third of the lease), or never known to be held: no.
    assert not executor._begins_on_loop(claimed("handoff.coroutine", now - 21.0))
    assert not executor._begins_on_loop(claimed("handoff.coroutine", None))
    # A thread handler's job is a slot thread's, whatever its lease.
    assert not executor._begins_on_loop(claimed("handoff.thread", now))


def test_the_next_job_runs_on_in_the_task_that_ran_the_last_one_and_finds_it_uncancelled(
        default_registry, conn, clean_db):
    """A job begun by the loop as a task ends runs in that same task, at once (as a slot
    thread runs one job after another). The task must come to it as a fresh one would:
    not counted as cancelling, whatever the job before it did with cancellation."""
    seen: list[tuple[int, int, int]] = []  # (job, task id, cancelling() at its start)

    @job("handoff.self_cancel", queue="io", lease=30.0, registry=default_registry)
    async def self_cancel(ctx, payload):
        task = asyncio.current_task()
        seen.append((payload["i"], id(task), task.cancelling()))
        task.cancel()
        task.cancel()  # twice: the runner takes one back, one would be left counted
        await asyncio.sleep(1)

    ids = [enqueue(conn, "handoff.self_cancel", {"i": i}) for i in range(6)]
    conn.commit()
    with running_worker(default_registry, clean_db, queues="io=1"):
        wait_for(lambda: all(job_row(clean_db, i)["status"] != "running"
                             and job_row(clean_db, i)["attempts"] >= 1 for i in ids)
                 and len(seen) >= 6, timeout=60, message="every job to run once")
    firsts = {}
    for i, task_id, _ in seen:
        firsts.setdefault(i, task_id)
    tasks = [firsts[i] for i in sorted(firsts)]
    # The scenario happened: one slot, so jobs ran one after another in a shared task.
    assert len(set(tasks)) < len(tasks), seen
    assert [cancelling for _, _, cancelling in seen] == [0] * len(seen), seen
