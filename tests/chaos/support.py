"""Small readers and waiters shared by the chaos tests (all time limits are deadlines)."""

from __future__ import annotations

import os
import signal
import time

import psycopg

from jobwarden import JobSpec, enqueue, enqueue_many
from jobwarden.worker.ops.operations import cancel_job
from tests.apps import chaos_app
from tests.helpers import job_row, scalar, wait_for

TERMINAL = ("completed", "failed", "cancelled", "skipped", "unknown")


def add(url: str, type_: str, payload: dict | None = None, **options) -> int:
    chaos_app.ensure_registered()
    with psycopg.connect(url) as conn:
        job_id = enqueue(conn, type_, payload or {}, queue="chaos", **options)
        conn.commit()
    return job_id


def add_many(url: str, type_: str, payloads: list[dict]) -> list[int]:
    chaos_app.ensure_registered()
    with psycopg.connect(url) as conn:
        ids = enqueue_many(conn, [JobSpec(type_, p, queue="chaos") for p in payloads])
        conn.commit()
    return ids


def settle(url: str, job_id: int, statuses=TERMINAL, timeout: float = 30.0) -> dict:
    return wait_for(lambda: (r := job_row(url, job_id))["status"] in statuses and r,
                    timeout=timeout, interval=0.1,
                    message=f"job {job_id} to reach one of {statuses}")


def running_on(url: str, job_id: int, timeout: float = 20.0) -> dict:
    """Wait until the job's handler has started; returns the job row."""
    wait_for(lambda: scalar(url, "SELECT count(*) FROM chaos_events WHERE job_id = %s "
                                 "AND event LIKE 'start%%'", [job_id]),
             timeout=timeout, message=f"job {job_id}'s handler to start")
    return job_row(url, job_id)


def events(url: str, job_id: int) -> list[tuple]:
    """(attempt, pid, event) in order."""
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT attempt, pid, event FROM chaos_events WHERE job_id = %s "
                            "ORDER BY id", [job_id]).fetchall()


def outcomes(url: str, job_id: int) -> list[str | None]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT outcome FROM job_executions_all WHERE job_id = %s "
            "ORDER BY attempt, id NULLS LAST",
            [job_id]).fetchall()]


def cancel(url: str, job_id: int, reason: str = "cancelled by the chaos test") -> str:
    """Cancel a job as an operator does (audited): at once when pending, by request when
    running; each expected status asked for on its own, so the answer says which it was."""
    with psycopg.connect(url, autocommit=True) as conn:
        for expected, answer in (("pending", "cancelled"), ("running", "requested")):
            if cancel_job(conn, job_id, actor="chaos", role="operator", reason=reason,
                          expected_status=expected).ok:
                return answer
    return "finished"


#: Backends of this database (other than the asking one) inside a transaction that
#: holds, or is about to take, row locks.
_WRITING = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
            "AND (backend_xid IS NOT NULL OR state = 'active')")


def stopped(pid: int, timeout: float = 5.0) -> float:
    """Wait until every thread of `pid` is stopped (SIGSTOP is delivered asynchronously:
    kill() can return while the target still runs for a moment) and return that moment on
    the monotonic clock: whatever the process stamped, it stamped before it."""
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    text = f.read()
            except OSError:
                continue  # a thread that has just ended
            states.append(text[text.rindex(")") + 2])
        if states and all(state in "tT" for state in states):
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} did not stop: thread states {states}")
        time.sleep(0.001)


def freeze_between_transactions(worker, url: str, tries: int = 50) -> float:
    """SIGSTOP the worker at a moment when none of its connections is inside a writing
    transaction: frozen mid-heartbeat, it would hold its job's row lock, and recovery
    (SKIP LOCKED) would never reach the job. Call it while the worker is the only client.
    Returns when it was frozen, on the machine's monotonic clock (time.monotonic())."""
    for _ in range(tries):
        worker.signal(signal.SIGSTOP)
        frozen_at = stopped(worker.pid)
        if not scalar(url, _WRITING):
            return frozen_at
        worker.signal(signal.SIGCONT)
        wait_for(lambda: not scalar(url, _WRITING), message="the worker's transaction to end")
    raise AssertionError(f"could not freeze worker {worker.pid} between transactions")


def holding_claims(workers, url: str, **start) -> tuple[object, list[int], list[int]]:
    """A worker of 50 slots holding over 500 claimed jobs, at the default batches (a claim
    of up to 1,000, a buffer of up to 2,000): 200 `chaos.noop` jobs first, so it learns its
    jobs take microseconds and claims far ahead; then 1,500 `chaos.sleep` jobs whose first
    attempt sleeps a minute (50 start, the rest wait in its buffer). Returns the worker
    and the ids of both kinds; `start` goes to workers.start."""
    worker = workers.start(concurrency=50, **start)
    warm = add_many(url, "chaos.noop", [{}] * 200)
    wait_for(lambda: scalar(url, "SELECT count(*) FROM background_jobs "
                                 "WHERE status = 'completed'") == len(warm),
             timeout=60, message="the quick jobs to complete")
    slow = add_many(url, "chaos.sleep", [{"first_attempt_seconds": 60}] * 1_500)
    wait_for(lambda: scalar(url, "SELECT count(*) FROM background_jobs WHERE status = "
                                 "'running' AND worker_id LIKE %s", [f"%:{worker.pid}:%"]) > 500,
             timeout=30, message="the worker to hold more claimed jobs than a recovery batch")
    return worker, warm, slow
