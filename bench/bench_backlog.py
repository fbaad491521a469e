"""Seed test 10 (backlog): enqueue N jobs, drain them with real worker processes, report
enqueue rate, claim latency under the backlog, throughput, oldest-pending age and the
load the queue puts on PostgreSQL (commits and WAL bytes per job; the WAL figure is the
whole cluster's LSN delta, so other sessions' writes are in it: `python -m bench.peers
--only wal` counts this database's WAL alone, per table and index).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/bench_backlog.py --jobs 100000 --workers 2 --concurrency 8

It creates (and drops) its own database on the server. Figures, not a pass/fail test:
the machine is shared, so compare runs made side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.peers.dbutil import with_db  # noqa: E402
from bench.peers.walstats import db_counters  # noqa: E402
from jobwarden.worker.engine.producer import claim_params  # noqa: E402
from jobwarden.worker.jobs.enqueue import JobSpec, enqueue_many  # noqa: E402
from jobwarden.worker.store.db import database_url, migrate  # noqa: E402
from jobwarden.worker.store.queries import Q  # noqa: E402


def create_database(server: str) -> tuple[str, str]:
    """A fresh database on `server` for one benchmark run: (its name, its URL)."""
    name = f"jobwarden_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return name, with_db(server, name)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def claim_latency(url: str, samples: int) -> list[float]:
    """Time the claim statement (10 jobs) against the full backlog, rolled back each time."""
    times = []
    with psycopg.connect(url) as conn:
        for _ in range(samples):
            start = time.perf_counter()
            conn.execute(Q.claim_jobs, claim_params(
                types=["noop"], leases=[30.0], queues=None, limit=10,
                worker_id="bench")).fetchall()
            times.append((time.perf_counter() - start) * 1000)
            conn.rollback()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--batch", type=int, default=5_000, help="jobs per enqueue statement")
    ap.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = ap.parse_args()

    server = database_url()
    name, url = create_database(server)
    results: dict[str, object] = {"jobs": args.jobs, "workers": args.workers,
                                  "concurrency": args.concurrency}
    procs: list[subprocess.Popen] = []
    try:
        migrate(url)
        with psycopg.connect(url) as conn:
            start = time.perf_counter()
            for offset in range(0, args.jobs, args.batch):
                n = min(args.batch, args.jobs - offset)
                enqueue_many(conn, [JobSpec("noop", {"n": offset + i}) for i in range(n)])
                conn.commit()
            enqueue_s = time.perf_counter() - start
            # No ANALYZE: the claim must hold on a table that was never analyzed, as on a
            # server with autovacuum off.
        results["enqueue_jobs_per_s"] = round(args.jobs / enqueue_s)

        lat = claim_latency(url, 200)
        results["claim_ms_under_backlog"] = {"p50": round(statistics.median(lat), 2),
                                             "p95": round(pct(lat, 0.95), 2)}

        env = dict(os.environ, DATABASE_URL=url, PYTHONPATH=ROOT)
        with psycopg.connect(url, autocommit=True) as conn:
            commits0, wal0 = db_counters(conn)
            start = time.perf_counter()
            procs = [subprocess.Popen(
                [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "worker",
                 "--app", "bench.noop_app", "--concurrency", str(args.concurrency)],
                cwd=ROOT, env=env) for _ in range(args.workers)]
            ages = []
            while True:
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE status IN ('pending', 'running')), "
                    "coalesce(extract(epoch FROM now() - min(available_at) "
                    "FILTER (WHERE status = 'pending')), 0) FROM background_jobs").fetchone()
                ages.append(float(row[1]))
                if row[0] == 0:
                    break
                time.sleep(0.5)
            drain_s = time.perf_counter() - start
            commits1, wal1 = db_counters(conn)
            done = conn.execute("SELECT count(*) FROM background_jobs "
                                "WHERE status = 'completed' AND attempts = 1").fetchone()[0]
        results["drain_seconds"] = round(drain_s, 1)
        results["throughput_jobs_per_s"] = round(args.jobs / drain_s)
        results["oldest_pending_age_max_s"] = round(max(ages), 1)
        results["commits_per_job"] = round((commits1 - commits0) / args.jobs, 2)
        results["wal_bytes_per_job"] = round((wal1 - wal0) / args.jobs)
        results["completed_once"] = done
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
        if not args.keep:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
