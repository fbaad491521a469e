"""A drain on a long, never analyzed execution history, with the row-count triggers
compiled by JIT (before migration 0067) and without (since).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/bench_trigger_jit.py --executions 2000000 --rounds 2

On a database of its own (dropped afterwards): N finished executions in this week's
partition, nothing ANALYZEd (the server runs with autovacuum off, as the queue must);
then, alternating, `--jobs` no-op jobs enqueued and drained by one `jobwarden worker`
process with the trigger functions as migration 0067 leaves them (`SET jit = off`) and
with that setting taken off again (`RESET jit`, as before 0067). The worker starts
after the setting changes, so its sessions plan the triggers' statements afresh.
Prints jobs/s per drain, worker start to the last completion.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.peers.dbutil import fresh_database  # noqa: E402
from jobwarden import JobSpec, enqueue_many  # noqa: E402
from jobwarden.worker.store.db import database_url, migrate  # noqa: E402

FUNCTIONS = ("jobwarden_rollup_update()", "jobwarden_rollup_rows()", "jobwarden_rollup_fold()",
             "jobwarden_notify_jobs()")
FILL = """
INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                            scheduled_at, started_at, heartbeat_at, finished_at, outcome,
                            duration_ms)
SELECT g, gen_random_uuid(), 1, 'default', 'noop', 'bench', now(), now(), now(),
       now() - interval '1 minute', 'completed', 1
FROM generate_series(1, %s) AS g
"""


def drain(url: str, jobs: int, timeout: float) -> tuple[int, float]:
    """Enqueue `jobs` no-op jobs, drain them with one worker process (at most `timeout`
    seconds); the jobs completed and the seconds it took."""
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM background_jobs")
        for start in range(0, jobs, 10_000):
            enqueue_many(conn, [JobSpec("noop", {"i": i})
                                for i in range(start, min(jobs, start + 10_000))])
            conn.commit()
    env = dict(os.environ, DATABASE_URL=url, PYTHONPATH=ROOT)
    worker = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "jobwarden"),
                               "--log-level", "WARNING", "worker", "--app", "bench.noop_app"],
                              cwd=ROOT, env=env)
    t0 = time.monotonic()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            done = 0
            while done < jobs and time.monotonic() - t0 < timeout:
                time.sleep(0.05)
                done = conn.execute("SELECT count(*) FROM background_jobs "
                                    "WHERE status = 'completed'").fetchone()[0]
            # When the last completion was seen (polled every 50 ms).
            seconds = time.monotonic() - t0
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    return done, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=2_000_000)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    with fresh_database(database_url(), "jit") as url:
        migrate(url)
        with psycopg.connect(url) as conn:
            conn.execute(FILL, [args.executions])
        print(f"{args.executions:,} executions, never analyzed; {args.jobs:,} jobs a drain")
        for rnd in range(1, args.rounds + 1):
            for setting in ("SET jit = off", "RESET jit"):
                with psycopg.connect(url, autocommit=True) as conn:
                    for function in FUNCTIONS:
                        conn.execute(f"ALTER FUNCTION {function} {setting}")
                done, seconds = drain(url, args.jobs, args.timeout)
                label = "triggers without JIT (0067)" if setting == "SET jit = off" else \
                    "triggers with JIT (before 0067)"
                print(f"round {rnd}: {label}: {done:,} of {args.jobs:,} jobs, "
                      f"{done / seconds:,.0f} jobs/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
