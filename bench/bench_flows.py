"""What flows cost: a fan-out with a fan-in beside as many independent jobs, and a chain's
per-hop latency beside a single job's enqueue-to-start.

- `independent`: `--jobs` no-op jobs, enqueued in one transaction, drained by one worker;
  the time from the worker's start to the last completion.
- `fan-in`: the same jobs plus one join enqueued `after` every one of them; the time from
  the worker's start to the join's completion (its release happens in the finish of the
  last parent: docs/guide/flows.md).
- `chain`: `--chain` jobs, each `after` the one before; a hop is the time from a parent's
  completion to its child's start, on the database clock (`completed_at` to the child's
  `started_at`).
- `single`: one job at a time into an idle worker; enqueue (`created_at`) to start.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/bench_flows.py --jobs 10000 --chain 1000

Each scenario runs in a database of its own (created and dropped), never analyzed.
Figures, not a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.bench_backlog import create_database, pct  # noqa: E402
from jobwarden import At, JobSpec, enqueue, enqueue_many  # noqa: E402
from jobwarden.worker.store.db import database_url, migrate  # noqa: E402

CHUNK = 5000


def start_worker(url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "worker",
         "--app", "bench.noop_app"],
        cwd=ROOT, env=dict(os.environ, DATABASE_URL=url, PYTHONPATH=ROOT))


def wait_until(url: str, sql: str, timeout: float = 600.0) -> float:
    """Seconds until `sql` returns true, polled every 20 ms."""
    start = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        while not conn.execute(sql).fetchone()[0]:
            if time.perf_counter() - start > timeout:
                raise TimeoutError(sql)
            time.sleep(0.02)
    return time.perf_counter() - start


def in_database(server: str, body: Callable[[str], dict[str, object]]) -> dict[str, object]:
    name, url = create_database(server)
    try:
        migrate(url)
        return body(url)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drained(url: str, jobs: int, join: bool) -> dict[str, object]:
    with psycopg.connect(url) as conn:
        for offset in range(0, jobs, CHUNK):
            enqueue_many(conn, [JobSpec("noop", {}) for _ in range(min(CHUNK, jobs - offset))])
        if join:
            ids = [r[0] for r in conn.execute("SELECT id FROM background_jobs ORDER BY id")]
            enqueue(conn, "noop", {"join": True}, after=ids)
    worker = start_worker(url)
    try:
        seconds = wait_until(url, f"SELECT count(*) = {jobs + join} FROM background_jobs "
                                  "WHERE status = 'completed'")
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    return {"jobs": jobs, "join": join, "seconds": round(seconds, 3),
            "jobs_per_s": round(jobs / seconds)}


def chain(url: str, length: int) -> dict[str, object]:
    with psycopg.connect(url) as conn:
        enqueue_many(conn, [JobSpec("noop", {"hop": n}, after=[At(n - 1)] if n else None)
                            for n in range(length)])
    worker = start_worker(url)
    try:
        wait_until(url, f"SELECT count(*) = {length} FROM background_jobs "
                        "WHERE status = 'completed'")
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    with psycopg.connect(url) as conn:
        hops = [float(ms) for (ms,) in conn.execute(
            "SELECT extract(epoch FROM c.started_at - p.completed_at) * 1000 "
            "FROM job_dependencies d JOIN background_jobs c ON c.id = d.job_id "
            "JOIN background_jobs p ON p.id = d.parent_id")]
    return {"hops": len(hops), "hop_ms": summary(hops)}


def single(url: str, samples: int) -> dict[str, object]:
    worker = start_worker(url)
    waits = []
    try:
        time.sleep(2.0)  # the worker is up and idle, listening
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(samples):
                job_id = enqueue(conn, "noop", {})
                wait_until(url, f"SELECT status = 'completed' FROM background_jobs "
                                f"WHERE id = {job_id}")
                (ms,) = conn.execute(
                    "SELECT extract(epoch FROM started_at - created_at) * 1000 "
                    "FROM background_jobs WHERE id = %s", [job_id]).fetchone()
                waits.append(float(ms))
                time.sleep(0.05)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    return {"samples": samples, "start_ms": summary(waits)}


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(ms), 2), "p99": round(pct(ms, 0.99), 2),
            "mean": round(statistics.fmean(ms), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--chain", type=int, default=1_000)
    ap.add_argument("--single", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="independent/fan-in pairs")
    args = ap.parse_args()
    server = database_url()
    pairs = []
    for _ in range(args.rounds):  # alternating, so a drift of the machine hits both
        plain = in_database(server, lambda url: drained(url, args.jobs, join=False))
        fanned = in_database(server, lambda url: drained(url, args.jobs, join=True))
        pairs.append((plain["seconds"], fanned["seconds"]))
    out = {
        "independent_s": [p for p, _ in pairs], "fan_in_s": [f for _, f in pairs],
        "fan_in_over_independent": round(statistics.median(f for _, f in pairs)
                                         / statistics.median(p for p, _ in pairs), 3),
        "chain": in_database(server, lambda url: chain(url, args.chain)),
        "single": in_database(server, lambda url: single(url, args.single)),
        "load": os.getloadavg()[0],
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
