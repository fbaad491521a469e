"""Test 11: several worker processes race for the same jobs; each is claimed once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from jobwarden import JobSpec, enqueue_many
from tests.helpers import scalar, start_process, status_counts, stop_processes, wait_for

JOBS = 1500
WORKERS = 3


def start_worker(app: str, *args: str) -> subprocess.Popen:
    return start_process(
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "worker", "--app", app,
         "--poll-interval", "0.2", *args],
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_racing_workers_claim_each_job_exactly_once(conn, clean_db):
    conn.execute("CREATE TABLE race_log (job_id bigint, execution_id uuid, pid int)")
    enqueue_many(conn, [JobSpec("race", {"n": i}) for i in range(JOBS)])
    conn.commit()
    procs = [start_worker("tests.apps.race_app", "--concurrency", "4") for _ in range(WORKERS)]
    try:
        wait_for(lambda: status_counts(clean_db).get("completed") == JOBS, timeout=120,
                 interval=0.2, message=f"{JOBS} jobs to complete")
    finally:
        errors = [err.decode()[-2000:] for _, err in stop_processes(procs, signal.SIGTERM)]
    assert [p.returncode for p in procs] == [0] * WORKERS, errors
    assert scalar(clean_db, "SELECT count(*) FROM race_log") == JOBS
    assert scalar(clean_db, "SELECT count(DISTINCT job_id) FROM race_log") == JOBS
    assert scalar(clean_db, "SELECT count(*) FROM job_executions") == JOBS
    assert scalar(clean_db, "SELECT max(attempts) FROM background_jobs") == 1
    # The work really was shared: every process ran some of it.
    assert scalar(clean_db, "SELECT count(DISTINCT pid) FROM race_log") == WORKERS
    assert scalar(clean_db, "SELECT count(*) FROM job_workers WHERE state = 'stopped'") == WORKERS
