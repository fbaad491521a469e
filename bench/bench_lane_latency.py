"""How long an email waits for its own lane behind another queue's backlog.

A worker serves `--queues email=2,reports=1`; `--backlog` reports (one second each) wait
in the `reports` queue, never analyzed. One email at a time is enqueued and the time from
its enqueue to its completion is read on the database clock (`created_at` to
`completed_at`: the claim, a no-op handler and the completer's flush). The execution's
`started_at` would hide the claim: it is the claim statement's own start. The email
lane's claim is also timed alone, rolled back: it walks the pending index past every
report ranked ahead of the email (docs/architecture.md §6, "Lanes").

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/bench_lane_latency.py --backlog 120000

It creates (and drops) its own database. Figures, not a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.bench_backlog import create_database, pct  # noqa: E402
from jobwarden.worker.engine.producer import claim_params  # noqa: E402
from jobwarden.worker.jobs.enqueue import JobSpec, enqueue, enqueue_many  # noqa: E402
from jobwarden.worker.store.db import database_url, migrate  # noqa: E402
from jobwarden.worker.store.queries import Q  # noqa: E402


def email_claim_ms(url: str, samples: int) -> list[float]:
    """The email lane's claim (2 jobs) with one email pending, rolled back each time."""
    times = []
    with psycopg.connect(url) as conn:
        enqueue(conn, "email", {"probe": True}, queue="email")
        conn.commit()
        for _ in range(samples):
            start = time.perf_counter()
            conn.execute(Q.claim_jobs, claim_params(
                types=["email"], leases=[30.0], type_queues=["email"], queues=["email"],
                limit=2, worker_id="bench")).fetchall()
            times.append((time.perf_counter() - start) * 1000)
            conn.rollback()
        conn.execute("DELETE FROM background_jobs WHERE type = 'email'")
        conn.commit()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backlog", type=int, default=120_000)
    ap.add_argument("--emails", type=int, default=30)
    args = ap.parse_args()
    server = database_url()
    name, url = create_database(server)
    worker = None
    try:
        migrate(url)
        with psycopg.connect(url) as conn:
            for offset in range(0, args.backlog, 5000):
                n = min(5000, args.backlog - offset)
                enqueue_many(conn, [JobSpec("report", {}, queue="reports") for _ in range(n)])
                conn.commit()
        claim = email_claim_ms(url, 50)
        worker = subprocess.Popen(
            [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "worker",
             "--app", "bench.lane_app", "--queues", "email=2,reports=1"],
            cwd=ROOT, env=dict(os.environ, DATABASE_URL=url, PYTHONPATH=ROOT))
        waits = []
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(args.emails):
                job_id = enqueue(conn, "email", {}, queue="email")
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    row = conn.execute(
                        "SELECT extract(epoch FROM completed_at - created_at) * 1000 "
                        "FROM background_jobs WHERE id = %s AND status = 'completed'",
                        [job_id]).fetchone()
                    if row:
                        waits.append(float(row[0]))
                        break
                    time.sleep(0.01)
                time.sleep(0.2)
        print(json.dumps({
            "backlog": args.backlog,
            "email_claim_ms": {"p50": round(statistics.median(claim), 1),
                               "p95": round(pct(claim, 0.95), 1)},
            "email_done_ms": {"p50": round(statistics.median(waits), 1),
                               "mean": round(statistics.fmean(waits), 1),
                               "p95": round(pct(waits, 0.95), 1), "n": len(waits)}}, indent=2))
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=30)
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
