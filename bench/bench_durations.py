"""A job type's duration chart and the audit log's lines, timed at the worst case for
one type (run by hand; not a test).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \
        .venv/bin/python bench/bench_durations.py --executions 1000000

Creates (or, with --reuse, reuses) the database `jobwarden_bench_durations`: --executions
executions in the history, all of ONE type (`hot`, the worst case for its page: its
week is the whole history), spread evenly over the last 7 days, plus --cold executions of
another type (`cold`) among them; a handler version published every day and --workers
worker starts; and --bulk bulk actions of --bulk-jobs audit rows each beside --singles
single actions. Never analyzed, as bench/bench_console.py's tables (a plain VACUUM sets
the visibility map). Then requests each page --requests times through the app in-process
and prints the server time (median and p95).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_console import _with_dbname  # noqa: E402
from jobwarden.worker.store import db as dbmod  # noqa: E402

PAGES = [
    ("type page, hot, 24 hours", "/types/hot"),
    ("type page, hot, 7 days", "/types/hot?range=7d"),
    ("type page, cold, 24 hours", "/types/cold"),
    ("type page, cold, 7 days", "/types/cold?range=7d"),
    ("audit, one line per action", "/audit/actions"),
    ("audit lines, one actor", "/audit/actions?actor=actor_3"),
    ("audit lines, one old day", "/audit/actions?from={old_day}&to={old_day}"),
    ("audit lines, 1 to 9999", "/audit/actions?from=0001-01-01&to=9999-12-31"),
    ("audit, every row", "/audit"),
]

FILL = """
INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
    scheduled_at, started_at, finished_at, outcome, duration_ms)
SELECT g, gen_random_uuid(), 1, 'q', CASE WHEN g %% %(every)s = 0 THEN 'cold' ELSE 'hot' END,
       'worker-' || (g %% 40), f - interval '1 second', f - d * interval '1 ms', f,
       CASE WHEN g %% 50 = 0 THEN 'retry' ELSE 'completed' END, d
FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g
CROSS JOIN LATERAL (SELECT now() - (%(n)s - g) * (interval '7 days' / %(n)s) AS f,
                           20 + 200 * random() * random() + (g %% 1000 = 0)::int * 5000 AS d) x
"""

AUDIT = """
INSERT INTO job_audit (job_id, bulk_id, actor, role, action, reason, at)
SELECT NULL, b.id, 'actor_' || (b.n %% 7), 'operator', 'retry', 'bench bulk ' || b.n,
       now() - (%(bulks)s - b.n) * (interval '30 days' / %(bulks)s)
FROM (SELECT n, gen_random_uuid() AS id FROM generate_series(1, %(bulks)s) n) b,
     generate_series(1, %(rows)s);
INSERT INTO job_audit (job_id, actor, role, action, reason, at)
SELECT NULL, 'actor_' || (n %% 7), 'operator', 'pause_queue', 'bench single ' || n,
       now() - (%(singles)s - n) * (interval '30 days' / %(singles)s)
FROM generate_series(1, %(singles)s) n
"""


def prepare(server_url: str, name: str, args) -> str:
    url = _with_dbname(server_url, name)
    if args.reuse:
        return url
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    dbmod.migrate(url)
    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        n = args.executions
        for lo in range(1, n + 1, 250_000):
            conn.execute(FILL, {"lo": lo, "hi": min(lo + 249_999, n), "n": n,
                                "every": max(1, n // max(args.cold, 1))})
            print(f"  {min(lo + 249_999, n):,} executions after "
                  f"{time.monotonic() - started:.0f}s", flush=True)
        conn.execute("""
            INSERT INTO job_type_versions (type, version, first_at, first_by)
            SELECT 'hot', v, now() - make_interval(days => 7 - v), 'worker-' || v
            FROM generate_series(1, 7) v""")
        conn.execute("""
            INSERT INTO job_workers (worker_id, host, pid, queues, job_types, concurrency,
                                     version, started_at, state)
            SELECT 'bench-' || w, 'host-' || (w %% 10), w, '{q}', '{hot,cold}', 8, 'bench',
                   now() - (%(w)s - w) * (interval '7 days' / %(w)s), 'gone'
            FROM generate_series(1, %(w)s) w""", {"w": args.workers})
        for statement in AUDIT.split(";"):
            conn.execute(statement, {"bulks": args.bulk, "rows": args.bulk_jobs,
                                     "singles": args.singles})
        conn.execute("VACUUM")
    print(f"filled in {time.monotonic() - started:.0f}s", flush=True)
    return url


def measure(url: str, requests: int) -> None:
    from jobwarden.console import create_app
    from jobwarden.console.cli.accounts import user_add, user_reset

    try:
        user_add("bench", "viewer", "bench-password", database_url=url)
    except ValueError:
        user_reset("bench", "bench-password", role="viewer", database_url=url)
    app = create_app({"DATABASE_URL": url, "SECRET_KEY": "bench", "WTF_CSRF_ENABLED": False})
    client = app.test_client()
    client.post("/login", data={"username": "bench", "password": "bench-password"})
    with psycopg.connect(url) as conn:
        counts = conn.execute("SELECT (SELECT count(*) FROM job_executions), "
                              "(SELECT count(*) FROM job_audit), "
                              "(SELECT count(*) FROM job_audit_lines), "
                              "((now() - interval '20 days') AT TIME ZONE 'UTC')::date"
                              ).fetchone()
    print(f"  {counts[0]:,} executions, {counts[1]:,} audit rows in {counts[2]:,} lines")
    for label, path in PAGES:
        path = path.format(old_day=counts[3])
        assert client.get(path).status_code == 200, path
        timings = []
        for _ in range(requests):
            started = time.perf_counter()
            response = client.get(path)
            timings.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        timings.sort()
        p95 = timings[min(len(timings) - 1, int(round(0.95 * len(timings))) - 1)]
        print(f"  {label:32} median {statistics.median(timings):7.1f} ms   p95 {p95:7.1f} ms",
              flush=True)
    app.extensions["jobwarden_db"].dispose()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--executions", type=int, default=1_000_000)
    p.add_argument("--cold", type=int, default=10_000, help="executions of the other type")
    p.add_argument("--workers", type=int, default=500, help="worker starts in the week")
    p.add_argument("--bulk", type=int, default=200, help="bulk actions in the audit log")
    p.add_argument("--bulk-jobs", type=int, default=1_000, help="audit rows of each")
    p.add_argument("--singles", type=int, default=5_000, help="single actions")
    p.add_argument("--requests", type=int, default=20)
    p.add_argument("--database", default="jobwarden_bench_durations")
    p.add_argument("--reuse", action="store_true", help="time an already filled database")
    args = p.parse_args(argv)
    server_url = os.environ.get("DATABASE_URL") or dbmod.database_url()
    url = prepare(dbmod.normalize_url(server_url), args.database, args)
    measure(url, args.requests)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
