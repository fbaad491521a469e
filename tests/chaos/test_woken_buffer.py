"""A worker frozen past its lease (SIGSTOP), its executions recovered by `jobwarden
recover`, then woken (SIGCONT): the jobs it had claimed ahead and not started are no longer
its own, and it must never start them, not even in the moments before its heartbeat learns
that (docs/faults.md, "Starting buffered work"). A plain handler (no effects ledger, no
business transaction) notes every start, so a second run of one execution shows.

A slot that had decided to start a job just before the freeze runs its handler after the
wake: allowed (the rule is about deciding). The handler records when the worker decided
(`ctx.started`, on the machine's monotonic clock), and only decisions after the freeze
count against the rule."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import psycopg
import pytest

from tests.chaos.support import add_many, freeze_between_transactions
from tests.chaos.test_zombie import woken_with_its_heartbeat_held
from tests.helpers import scalar, wait_for

pytestmark = pytest.mark.chaos

JOBS = 400
SECONDS = 0.02  # short jobs: the worker claims about ten ahead of its two slots


def _worker_id(url: str, worker) -> str:
    return wait_for(lambda: scalar(url, "SELECT max(worker_id) FROM job_workers WHERE pid = %s",
                                   [worker.pid]), message="the worker to register")


def _buffered(url: str, worker_id: str) -> set:
    """The executions `worker_id` has claimed and not started."""
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT execution_id FROM background_jobs j WHERE status = 'running' "
            "AND worker_id = %s AND NOT EXISTS (SELECT 1 FROM chaos_events e "
            "WHERE e.execution_id = j.execution_id)", [worker_id]).fetchall()}


def freeze_with_jobs_buffered(workers, url: str, app: str):
    """Start a worker, let it get going, freeze it past its lease and recover its jobs by
    hand. Returns (worker, the executions it claimed and never started, the recovered
    executions, when it was frozen on the monotonic clock)."""
    worker = workers.start(app, concurrency=2)
    add_many(url, "chaos.plain", [{"seconds": SECONDS}] * JOBS)
    worker_id = _worker_id(url, worker)
    wait_for(lambda: scalar(url, "SELECT count(*) FROM chaos_events") >= 40,
             message="the worker to run its first jobs")
    # The buffer is empty at moments (its slots have just taken the last claimed jobs and
    # the next claim has not committed): freeze again until it holds some.
    for _ in range(20):
        frozen_at = freeze_between_transactions(worker, url)
        if buffered := _buffered(url, worker_id):
            break
        worker.signal(signal.SIGCONT)
        seen = scalar(url, "SELECT count(*) FROM chaos_events")
        wait_for(lambda seen=seen: scalar(url, "SELECT count(*) FROM chaos_events") >= seen + 5,
                 message="the worker to run more jobs")
    assert buffered, "the frozen worker should hold claimed jobs it has not started"
    wait_for(lambda: scalar(url, "SELECT count(*) FROM background_jobs WHERE status = "
                                 "'running' AND lease_expires_at >= now()") == 0,
             timeout=10, message="the frozen worker's leases to run out")
    out = subprocess.run(
        [sys.executable, "-m", "jobwarden.worker.cli", "recover", "--app", "tests.apps.chaos_app"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1])["recovered"]["pending"] >= len(buffered)
    with psycopg.connect(url) as conn:
        recovered = {r[0] for r in conn.execute(
            "SELECT execution_id FROM job_executions WHERE outcome = 'worker_lost'")}
        recovered_at = conn.execute("SELECT now()").fetchone()[0]
    assert buffered <= recovered
    return worker, recovered, recovered_at, frozen_at


def decided_after(url: str, executions: set, frozen_at: float) -> list:
    """Executions among `executions` that the worker decided to start after `frozen_at`:
    after its freeze, so after they had been recovered."""
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT execution_id FROM chaos_events WHERE event = 'started' "
            "AND execution_id = ANY(%s) AND decided_at > %s", [list(executions), frozen_at])]


def test_a_woken_worker_never_starts_buffered_jobs_recovered_while_it_was_frozen(
        workers, chaos_db, handler_app):
    worker, recovered, recovered_at, frozen_at = freeze_with_jobs_buffered(workers, chaos_db,
                                                                          handler_app)
    # Its heartbeat is held on a row lock, so nothing but the start itself can find out
    # that the buffered executions are gone.
    with woken_with_its_heartbeat_held(worker, chaos_db):
        wait_for(lambda: scalar(
            chaos_db, "SELECT count(*) FROM chaos_events WHERE pid = %s AND at > %s "
                      "AND NOT (execution_id = ANY(%s))",
            [worker.pid, recovered_at, list(recovered)]) >= 5,
            message="the woken worker to go on with jobs it claimed after waking")
        assert decided_after(chaos_db, recovered, frozen_at) == []
    assert worker.logged("lease lost while waiting in the buffer; not started")


def test_a_plain_handler_runs_each_execution_at_most_once_across_a_freeze(
        workers, chaos_db, handler_app):
    worker, recovered, _recovered_at, frozen_at = freeze_with_jobs_buffered(
        workers, chaos_db, handler_app)
    worker.signal(signal.SIGCONT)
    wait_for(lambda: scalar(chaos_db, "SELECT count(*) FROM background_jobs "
                                      "WHERE status = 'completed'") == JOBS,
             timeout=60, message="every job to complete")
    assert decided_after(chaos_db, recovered, frozen_at) == []
    with psycopg.connect(chaos_db) as conn:
        twice = conn.execute("SELECT execution_id, count(*) FROM chaos_events "
                             "WHERE event = 'started' GROUP BY 1 HAVING count(*) > 1").fetchall()
        completed_runs = conn.execute(
            "SELECT count(*) FROM job_executions WHERE outcome = 'completed'").fetchone()[0]
    assert twice == []
    assert completed_runs == JOBS  # each job completed once, by exactly one execution
