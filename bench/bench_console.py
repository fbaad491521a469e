"""Console page timings on a large database (run by hand; not a test).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \
        .venv/bin/python bench/bench_console.py --jobs 1000000 --failed 100000

Creates (or, with --reuse, reuses) the database `jobwarden_bench` on DATABASE_URL's
server, fills it with --jobs jobs (--failed of them failed across --codes error codes,
one execution row per started job, the last hour busy, and --retrying jobs of an outage
still retrying as the fill ends; never analyzed: no column statistics, as with autovacuum
off), and then requests each page
--requests times through the app in-process, printing the server time (median and p95).
The bulk reviews are of two selections it makes first (one failed group, every failed
job), timing the request that makes each; --bulk-chunks N also times N chunks of a bulk
retry (which changes the database).
The goal: each page under 150 ms median at 10,000,000 jobs.

--live-rate N runs a live load while the pages are timed: a worker process (bench.noop_app)
and a feeder enqueueing N no-op jobs a minute, so the last hour's history grows as it does
in production; the run prints the executions a minute the worker achieved over the timing.
--only picks pages by label (`--only SLA,"failed groups"`); the SLA page's median and p95
are compared with the Failed page's (the goal: within 2x, issue 39), e.g.

    DATABASE_URL=... .venv/bin/python bench/bench_console.py --jobs 3000000 --failed 300000 \
        --live-rate 1500 --only "SLA,failed groups"
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobwarden.worker.store import db as dbmod  # noqa: E402

PAGES = [
    ("overview", "/"),
    ("overview counts panel", "/_overview/counts"),
    ("failed groups", "/failed"),
    ("failed groups of a type", "/failed?type=type_7"),
    ("failed group drill-down", "/failed/group?code=ERR_07"),
    ("failed group, code and type", "/failed/group?code=ERR_07&type=type_7"),
    ("failed group, a type alone", "/failed/group?type=type_7"),
    ("retrying group", "/failed/group?code=CRM_UNAVAILABLE&type=type_3"),
    ("jobs list", "/jobs"),
    ("jobs list, status=failed", "/jobs?status=failed"),
    ("jobs list, type filter", "/jobs?type=type_3"),
    ("jobs list, error code", "/jobs?error_code=ERR_11"),
    ("jobs list, key search", "/jobs?q=key-424242"),
    ("jobs list, page 2", "/jobs?before={second_page}"),
    ("jobs list, an old hour", "/jobs?created_from={old_hour}&created_to={old_hour_end}"),
    ("jobs list, an old hour's failed", "/jobs?status=failed&created_from={old_hour}"
                                        "&created_to={old_hour_end}"),
    ("jobs list, jump to an old time", "/jobs?at={old_hour_end}"),
    ("job detail", "/jobs/{some_job}"),
    ("trend chart, 24 hours", "/_overview/trends?range=24h"),
    ("trend chart, one queue", "/_overview/trends?range=1h&queue=queue_2"),
    ("trend chart, one type", "/_overview/trends?range=1h&type=type_3"),
    ("workers", "/workers"),
    ("queues", "/queues"),
    ("audit log", "/audit"),
    ("audit log, one line per action", "/audit/actions"),
    ("type page, durations 24 hours", "/types/type_3"),
    ("type page, durations 7 days", "/types/type_3?range=7d"),
    ("needs review", "/review"),
    ("needs review, one group", "/review?of={unknown_job}"),
    ("SLA", "/sla"),
    ("metrics", "/metrics"),
    ("search, job id", "/search?q={some_job}"),
    ("search, idempotency key", "/search?q=key%3Akey-424242"),
    ("search, payload value", "/search?q=customer.id%3D4242"),
    ("search, payload, older window", "/search?q=customer.id%3D4242&before={older_window}"),
    ("search, error text", "/search?q=error%3Atimed%20out"),
    ("search, error words, an old hour", "/search?q=error%3Ajob%20{old_failed}"
                                         "&created_from={old_hour}&created_to={old_hour_end}"),
    ("bulk review, one group", "/bulk/{review_group}"),
    ("bulk review, every failed job", "/bulk/{review_failed}"),
]

# Statuses by share of the non-failed jobs (failed: every `every`-th job, --failed of them
# when --jobs is a multiple of it).
FILL = """
INSERT INTO background_jobs (queue, type, payload, status, priority, attempts, max_attempts,
    created_at, available_at, started_at, completed_at, failed_at, cancelled_at, skipped_at,
    last_error_code, last_error, idempotency_key, execution_id, worker_id, heartbeat_at,
    lease_expires_at)
SELECT 'queue_' || (g %% 5), 'type_' || (g %% 10),
       jsonb_build_object('n', g, 'email', 'user' || g || '@example.com',
                          'customer', jsonb_build_object('id', g %% 100000)),
       s.status, 0, CASE WHEN s.status = 'pending' THEN 0 ELSE 1 END, 5,
       t.created, t.created,
       CASE WHEN s.status NOT IN ('pending', 'cancelled') THEN t.created + interval '2 seconds' END,
       CASE WHEN s.status = 'completed' THEN t.created + interval '3 seconds' END,
       CASE WHEN s.status = 'failed' THEN t.created + interval '3 seconds' END,
       CASE WHEN s.status = 'cancelled' THEN t.created END,
       CASE WHEN s.status = 'skipped' THEN t.created END,
       CASE WHEN s.status = 'failed'
            THEN 'ERR_' || lpad(((g / %(every)s) %% %(codes)s)::text, 2, '0') END,
       CASE WHEN s.status = 'failed' THEN 'provider said no for job ' || g END,
       'key-' || g,
       CASE WHEN s.status = 'running' THEN gen_random_uuid() END,
       CASE WHEN s.status = 'running' THEN 'bench-worker' END,
       CASE WHEN s.status = 'running' THEN now() END,
       CASE WHEN s.status = 'running' THEN now() + interval '1 minute' END
FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g
CROSS JOIN LATERAL (SELECT
    CASE
      -- every `every`-th job (all of type_7): failures spread over the whole week
      WHEN g %% %(every)s = 7 THEN 'failed'
      WHEN g %% 1000 = 1 THEN 'running'
      WHEN g %% 100 = 2 THEN 'unknown'
      WHEN g %% 50 = 3 THEN 'cancelled'
      WHEN g %% 50 = 4 THEN 'skipped'
      WHEN g > %(jobs)s - %(pending)s THEN 'pending'
      ELSE 'completed'
    END AS status) s
-- a week of history, the newest jobs last; about 2 percent inside the last hour
CROSS JOIN LATERAL (SELECT now() - ((%(jobs)s - g) * (interval '7 days' / %(jobs)s)) AS created) t;
"""

EXECUTIONS = """
INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id, scheduled_at,
    started_at, finished_at, outcome, error_code, error, duration_ms)
SELECT id, coalesce(execution_id, gen_random_uuid()), 1, queue, type, 'bench-worker',
       available_at, started_at,
       CASE WHEN status <> 'running' THEN started_at + interval '1 second' END,
       CASE status WHEN 'completed' THEN 'completed' WHEN 'failed' THEN 'failed'
                   WHEN 'unknown' THEN 'unknown' WHEN 'skipped' THEN 'skipped' END,
       last_error_code, last_error, CASE WHEN status <> 'running' THEN 1000 + (id %% 500) END
FROM background_jobs
WHERE started_at IS NOT NULL AND id BETWEEN %(lo)s AND %(hi)s;
"""


CHUNK = 1_000_000

# The fill writes the two big tables with only their primary keys, then builds every other
# index and constraint once, sorted: at 10,000,000 jobs a row-by-row index insert (and a
# foreign-key check per execution row) is what made the fill take hours on 2 cores.
BIG_TABLES = ("background_jobs", "job_executions")
DEFERRED_CONSTRAINTS = """
SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid = ANY(%(tables)s::regclass[]) AND contype IN ('u', 'f')
ORDER BY contype DESC, conname
"""
DEFERRED_INDEXES = """
SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i
WHERE i.indrelid = ANY(%(tables)s::regclass[]) AND NOT i.indisprimary
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
ORDER BY 1
"""


def _with_dbname(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def prepare(server_url: str, name: str, args) -> str:
    url = _with_dbname(server_url, name)
    if args.reuse:
        return url
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    dbmod.migrate(url)
    started = time.monotonic()
    pending = min(args.pending, args.jobs // 4)
    # A multiple of 10 keeps every failed job of type_7 (type_N is id mod 10).
    every = max(10, args.jobs // args.failed // 10 * 10)

    def step(what: str) -> None:
        print(f"  {what} after {time.monotonic() - started:.0f}s", flush=True)

    with psycopg.connect(url, autocommit=True) as conn:
        tables = {"tables": list(BIG_TABLES)}
        constraints = conn.execute(DEFERRED_CONSTRAINTS, tables).fetchall()
        # A partitioned table's index reads back as CREATE INDEX ... ON ONLY (the parent
        # alone, no partition's index): rebuilt that way the history's weeks would have
        # none (migration 0066), so it is rebuilt for the whole table.
        indexes = [(index, definition.replace(" ON ONLY ", " ON ", 1))
                   for index, definition in conn.execute(DEFERRED_INDEXES, tables)]
        for table, constraint, _ in constraints:
            conn.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{constraint}"')
        for index, _ in indexes:
            conn.execute(f"DROP INDEX {index}")
        # A million rows per statement: progress shows, and no transition table is huge.
        for lo in range(1, args.jobs + 1, CHUNK):
            conn.execute(FILL, {"jobs": args.jobs, "every": every, "codes": args.codes,
                                "pending": pending, "lo": lo,
                                "hi": min(lo + CHUNK - 1, args.jobs)})
            conn.execute(EXECUTIONS, {"lo": lo, "hi": min(lo + CHUNK - 1, args.jobs)})
            step(f"{min(lo + CHUNK - 1, args.jobs):,} jobs")
        # An outage still retrying when the fill ends: --retrying type_3 jobs whose
        # attempts failed with CRM_UNAVAILABLE, among type_3's pending backlog.
        seed_retry_storm(url, args.retrying)
        # Session settings only (the shared server is not reconfigured): room to sort.
        conn.execute("SET maintenance_work_mem = '256MB'")
        for _, definition in indexes:
            conn.execute(definition)
        for table, constraint, definition in constraints:
            conn.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{constraint}" {definition}')
        step(f"{len(indexes)} indexes and {len(constraints)} constraints built")
        # The triggers counted the inserts; the per-minute history of outcomes that
        # happened "before" the fill comes from the jobs' timestamps. No ANALYZE: the
        # pages are timed on the statistics a database without autovacuum has (none for
        # these tables), as the queue's own benchmarks are.
        with conn.transaction():
            conn.execute("SET LOCAL enable_nestloop = off")
            conn.execute("SET LOCAL work_mem = '256MB'")
            conn.execute("SELECT jobwarden_rollup_rebuild()")
        step("rollups rebuilt")
        # A plain VACUUM (no ANALYZE) sets the visibility map, as any vacuum of a table
        # this size would, so index-only scans read no heap (bench/README.md@eb7c2f0, "Console
        # pages"); it gathers no column statistics.
        conn.execute("VACUUM")
    print(f"filled {args.jobs:,} jobs in {time.monotonic() - started:.0f}s", flush=True)
    return url


def seed_retry_storm(url: str, jobs: int) -> None:
    from sqlalchemy import create_engine

    from jobwarden.console.data import sample_data

    engine = create_engine(dbmod.sqlalchemy_url(url))
    with engine.begin() as conn:
        sample_data.seed_retry_storm(conn, "type_3", queue="queue_3", jobs=jobs, rebuild=False)
    engine.dispose()


def report_counts(url: str) -> None:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT status, count(*) FROM background_jobs GROUP BY 1 ORDER BY 1")
        print("  " + ", ".join(f"{s} {n:,}" for s, n in rows))
        codes = conn.execute("SELECT count(DISTINCT last_error_code) FROM background_jobs "
                             "WHERE status = 'failed'").fetchone()[0]
        print(f"  {codes} error codes among failed jobs")


def measure(url: str, requests: int, chunks: int = 0,
            only: set[str] | None = None) -> list[tuple[str, float, float]]:
    from jobwarden.console import create_app
    from jobwarden.console.cli.accounts import user_add, user_reset

    try:
        user_add("bench", "operator", "bench-password", database_url=url)
    except ValueError:  # --reuse: an earlier run added it
        user_reset("bench", "bench-password", role="operator", database_url=url)
    app = create_app({"DATABASE_URL": url, "SECRET_KEY": "bench", "WTF_CSRF_ENABLED": False})
    client = app.test_client()
    client.post("/login", data={"username": "bench", "password": "bench-password"})
    with psycopg.connect(url) as conn:
        second_page = conn.execute(
            "SELECT id FROM background_jobs ORDER BY id DESC OFFSET 50 LIMIT 1").fetchone()[0]
        some_job = conn.execute("SELECT min(id) FROM background_jobs "
                                "WHERE status = 'failed'").fetchone()[0]
        newest = conn.execute("SELECT max(id) FROM background_jobs").fetchone()[0]
        # Finding an old job: the hour of the first failed job after #4242, its words.
        old_failed, old_at = conn.execute(
            "SELECT id, created_at FROM background_jobs WHERE status = 'failed' "
            "AND id >= 4242 ORDER BY id LIMIT 1").fetchone()
        unknown_job = conn.execute("SELECT max(id) FROM background_jobs "
                                   "WHERE status = 'unknown'").fetchone()[0]
    old_hour = quote(old_at.replace(minute=0, second=0, microsecond=0).isoformat())
    old_hour_end = quote((old_at.replace(minute=0, second=0, microsecond=0)
                          + timedelta(hours=1)).isoformat())
    window = app.extensions["jobwarden_console"].settings["SEARCH_WINDOW"]
    # The bulk reviews: one failed group, and every failed job (the selection is made by
    # one request each, timed once: a POST that stores the ids).
    reviews = {"review_group": "", "review_failed": ""}
    pages = [(label, path) for label, path in PAGES if not only or label in only]
    for name, form in (("review_group", {"error_code": "ERR_07"}), ("review_failed", {})):
        if not any("{" + name + "}" in path for _, path in pages):
            continue
        started = time.perf_counter()
        response = client.post("/bulk/select", data={"action": "retry", "all_matching": "1",
                                                      "status": "failed", **form})
        took = (time.perf_counter() - started) * 1000
        assert response.status_code == 303, response.status_code
        reviews[name] = response.headers["Location"].split("/bulk/", 1)[1].split("?")[0]
        print(f"  selecting for {name.replace('_', ' ')}: {took:.0f} ms (once)", flush=True)
    results = []
    for label, path in pages:
        path = path.format(second_page=second_page + 1, some_job=some_job,
                           older_window=max(newest + 1 - window, 2), old_failed=old_failed,
                           old_hour=old_hour, old_hour_end=old_hour_end,
                           unknown_job=unknown_job, **reviews)
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        timings = []
        for _ in range(requests):
            started = time.perf_counter()
            response = client.get(path)
            timings.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        timings.sort()
        p95 = timings[min(len(timings) - 1, int(round(0.95 * len(timings))) - 1)]
        results.append((f"{label} ({path})", statistics.median(timings), p95))
        print(f"  {label:30} median {statistics.median(timings):7.1f} ms   p95 {p95:7.1f} ms",
              flush=True)
    if chunks:
        response = client.post("/bulk/select", data={"action": "retry", "all_matching": "1",
                                                     "status": "failed", "error_code": "ERR_19"})
        time_chunks(client, response.headers["Location"].split("/bulk/", 1)[1].split("?")[0],
                    chunks)
    app.extensions["jobwarden_db"].dispose()
    return results


def time_chunks(client, selection: str, chunks: int) -> None:
    """Retry the group's selection chunk by chunk (this changes the database: those jobs
    go back to pending), timing each POST that does one chunk."""
    response = client.post(f"/bulk/{selection}", data={
        "reason": "bench", "request_id": f"bench-{selection}", "mode": "all"})
    assert response.status_code == 303, response.status_code
    timings = []
    for _ in range(chunks):
        started = time.perf_counter()
        response = client.post(f"/bulk/{selection}/step", headers={"HX-Request": "true"})
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
        if 'hx-post="' not in response.get_data(as_text=True):
            break
    print(f"  bulk retry, one chunk per POST: median {statistics.median(timings):7.1f} ms "
          f"over {len(timings)} chunks", flush=True)


class LiveLoad:
    """A worker process draining no-op jobs that a feeder thread enqueues at `rate` a
    minute (one INSERT a second), as production traffic adds to the history."""

    def __init__(self, url: str, rate: int):
        self.url, self.rate = url, rate
        self.stopping = threading.Event()
        self.feeder = threading.Thread(target=self._feed, daemon=True)
        root = str(Path(__file__).resolve().parent.parent)
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "worker",
             "--app", "bench.noop_app", "--concurrency", "8"],
            cwd=root, env=dict(os.environ, DATABASE_URL=url, PYTHONPATH=root))
        self.feeder.start()

    def _feed(self) -> None:
        owed = 0.0
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stopping.wait(1.0):
                owed += self.rate / 60
                n, owed = int(owed), owed - int(owed)
                conn.execute("INSERT INTO background_jobs (queue, type, payload) "
                             "SELECT 'default', 'noop', '{}' FROM generate_series(1, %s)", [n])

    def executions_since(self, since: float) -> int:
        """Executions of the live load the worker finished since `since` (epoch s)."""
        with psycopg.connect(self.url) as conn:
            return conn.execute(
                "SELECT count(*) FROM job_executions WHERE type = 'noop' "
                "AND finished_at >= to_timestamp(%s) AND finished_at < now() + interval '1 day'",
                [since]).fetchone()[0]

    def stop(self) -> None:
        self.stopping.set()
        self.feeder.join(timeout=10)
        self.worker.terminate()
        self.worker.wait(timeout=60)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--failed", type=int, default=100_000)
    p.add_argument("--codes", type=int, default=20)
    p.add_argument("--pending", type=int, default=50_000)
    p.add_argument("--retrying", type=int, default=2_000,
                   help="type_3 jobs still retrying CRM_UNAVAILABLE when the fill ends")
    p.add_argument("--requests", type=int, default=30)
    p.add_argument("--database", default="jobwarden_bench", help="database name to (re)create")
    p.add_argument("--reuse", action="store_true", help="time an already filled database")
    p.add_argument("--load-only", action="store_true", help="fill the database, time nothing")
    p.add_argument("--live-rate", type=int, default=0, metavar="N",
                   help="run a worker and enqueue N no-op jobs a minute while timing")
    p.add_argument("--warm-up", type=float, default=90.0, metavar="S",
                   help="seconds of live load before the timing starts")
    p.add_argument("--only", default="", help="comma-separated page labels to time")
    p.add_argument("--bulk-chunks", type=int, default=0, metavar="N",
                   help="also time N chunks of a bulk retry of group ERR_19 (changes the "
                        "database: those jobs go back to pending)")
    args = p.parse_args(argv)
    if args.failed * 10 > args.jobs:
        p.error("--failed may be at most a tenth of --jobs")
    server_url = os.environ.get("DATABASE_URL") or dbmod.database_url()
    url = prepare(dbmod.normalize_url(server_url), args.database, args)
    report_counts(url)
    if args.load_only:
        return 0
    load = LiveLoad(url, args.live_rate) if args.live_rate else None
    try:
        if load:
            print(f"live load: {args.live_rate} jobs a minute, {args.warm_up:.0f} s warm-up",
                  flush=True)
            time.sleep(args.warm_up)
        began = time.time()
        print(f"server time over {args.requests} requests per page (in-process, no network):")
        only = {label.strip() for label in args.only.split(",") if label.strip()}
        results = measure(url, args.requests, args.bulk_chunks, only)
        if load:
            done = load.executions_since(began)
            print(f"live load during the timing: {done:,} executions in "
                  f"{time.time() - began:.0f} s, "
                  f"{done / max(time.time() - began, 1) * 60:,.0f} a minute", flush=True)
    finally:
        if load:
            load.stop()
    by_label = {r[0].split(" (")[0]: r for r in results}
    if "SLA" in by_label and "failed groups" in by_label:
        sla, failed = by_label["SLA"], by_label["failed groups"]
        print(f"SLA / Failed: median {sla[1] / failed[1]:.2f}x, p95 {sla[2] / failed[2]:.2f}x "
              f"(goal: within 2x)")
    slow = [r for r in results if r[1] > 150]
    print("all pages under 150 ms median" if not slow else
          "over 150 ms median: " + ", ".join(r[0] for r in slow))
    return 0


if __name__ == "__main__":
    sys.exit(main())
