"""The execution history at scale: migrating a filled `job_executions` to weekly
partitions (migration 0066) without a long lock, retention by dropping a week instead
of a DELETE, and the history's reads before and after.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/bench_partitions.py --executions 10000000

On a database of its own (dropped afterwards): N executions of N/10 jobs, finished over
the last 70 days, at migration 0065 (the plain table); then

- the history's reads at 0065: one job's attempts (the job page), the last hour's
  outcomes (the overview), the recovered-in-the-last-hour list;
- `migrate` to head while a writer inserts one history row every 5 ms: how long the
  migration took, and the longest any one insert waited (the write stall: the lock);
- the same reads on the partitioned table;
- retention: one week of history removed by DELETE (on the plain table's rows, in the
  default partition) against one week dropped as a partition: seconds and WAL bytes.

Nothing is ANALYZEd: the server runs with autovacuum off, as the queue must.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.peers.dbutil import with_db  # noqa: E402
from jobwarden.worker.store.db import database_url, migrate  # noqa: E402

READS = {
    "job attempts (job page)": """
        SELECT attempt, outcome, finished_at FROM job_executions
        WHERE job_id = %(job)s ORDER BY attempt""",
    "last hour's outcomes": """
        SELECT outcome, count(*) FROM job_executions
        WHERE finished_at > now() - interval '1 hour' GROUP BY outcome""",
    "recovered in the last hour": """
        SELECT job_id, finished_at FROM job_executions
        WHERE finished_at > now() - interval '1 hour' AND outcome = 'worker_lost'
        ORDER BY finished_at DESC LIMIT 50""",
}


def fill(url: str, executions: int) -> None:
    jobs = max(1, executions // 10)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO background_jobs (type, payload, status, created_at, completed_at)
            SELECT 'noop', '{}', 'completed', now() - interval '70 days',
                   now() - interval '70 days'
            FROM generate_series(1, %(jobs)s)""", {"jobs": jobs})
        # Ten executions a job, finished evenly over the last 70 days, a few recovered.
        conn.execute("""
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                worker_id, scheduled_at, started_at, finished_at, outcome, duration_ms)
            SELECT 1 + (g %% %(jobs)s), gen_random_uuid(), 1 + g / %(jobs)s, 'default',
                   'noop', 'w', t, t, t,
                   CASE WHEN g %% 997 = 0 THEN 'worker_lost' ELSE 'completed' END, 1
            FROM generate_series(0, %(n)s - 1) AS g,
                 LATERAL (SELECT now() - make_interval(secs => 70 * 86400.0 * g / %(n)s)
                          AS t) AS x""", {"jobs": jobs, "n": executions})
        conn.execute("CHECKPOINT")


def time_reads(url: str, rounds: int = 21) -> dict[str, float]:
    out = {}
    with psycopg.connect(url, autocommit=True) as conn:
        top = conn.execute("SELECT max(id) FROM background_jobs").fetchone()[0]
        for name, sql in READS.items():
            times = []
            for i in range(rounds):
                start = time.perf_counter()
                conn.execute(sql, {"job": 1 + (i * 7919) % top}).fetchall()
                times.append((time.perf_counter() - start) * 1000)
            out[name] = statistics.median(times)
    return out


class Writer(threading.Thread):
    """One history row every 5 ms, as finishing executions write them; records how long
    each insert took."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.stop, self.waits = url, threading.Event(), []

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                start = time.perf_counter()
                conn.execute("""
                    INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                        worker_id, scheduled_at, started_at, finished_at, outcome)
                    VALUES (1, %s, 99, 'default', 'noop', 'w', now(), now(), now(),
                            'completed')""", (uuid.uuid4(),))
                self.waits.append(time.perf_counter() - start)
                time.sleep(0.005)


def wal_and_time(url: str, sql: str) -> tuple[float, int, int]:
    """(seconds, WAL bytes, rows) of one statement."""
    with psycopg.connect(url, autocommit=True) as conn:
        lsn0 = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        start = time.perf_counter()
        rows = conn.execute(sql).rowcount
        took = time.perf_counter() - start
        wal = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)",
                           (lsn0,)).fetchone()[0]
    return took, int(wal), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=1_000_000)
    args = parser.parse_args()
    server = database_url()
    name = f"jobwarden_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = with_db(server, name)
    try:
        migrate(url, "0065")
        start = time.perf_counter()
        fill(url, args.executions)
        print(f"filled {args.executions:,} executions in {time.perf_counter() - start:.0f} s")
        before = time_reads(url)
        writer = Writer(url)
        writer.start()
        time.sleep(0.5)
        start = time.perf_counter()
        migrate(url)
        took = time.perf_counter() - start
        time.sleep(0.5)
        writer.stop.set()
        writer.join()
        waits = sorted(writer.waits)
        print(f"migration to partitions: {took:.1f} s; a writer's inserts meanwhile: "
              f"{len(waits)}, median {statistics.median(waits) * 1000:.1f} ms, "
              f"longest {waits[-1] * 1000:.0f} ms")
        after = time_reads(url)
        # Retention of one week of the old history by DELETE, as retention did.
        deleted = wal_and_time(url, """
            DELETE FROM job_executions WHERE finished_at < now() - interval '63 days'""")
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    # The same history written since the migration: in weekly partitions (made by hand
    # for the past weeks, as the runtime makes them ahead), then one week dropped.
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("""
                DO $$
                DECLARE w timestamptz := date_trunc('week', (now() - interval '77 days')
                                                    AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
                BEGIN
                    WHILE w < date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                    LOOP
                        EXECUTE format('CREATE TABLE %I PARTITION OF job_executions '
                                       'FOR VALUES FROM (%L) TO (%L)',
                                       'job_executions_w' || to_char(w AT TIME ZONE 'UTC',
                                                                     'YYYYMMDD'),
                                       w, w + interval '7 days');
                        w := w + interval '7 days';
                    END LOOP;
                END $$""")
        start = time.perf_counter()
        fill(url, args.executions)
        print(f"\nfilled {args.executions:,} executions into weekly partitions in "
              f"{time.perf_counter() - start:.0f} s")
        weekly = time_reads(url)
        print("\n| read (median of 21) | plain table | after the migration | in weeks |\n"
              "|---|---|---|---|")
        for read in READS:
            print(f"| {read} | {before[read]:.1f} ms | {after[read]:.1f} ms | "
                  f"{weekly[read]:.1f} ms |")
        with psycopg.connect(url, autocommit=True) as conn:
            oldest, rows = conn.execute("""
                SELECT p.name, (SELECT count(*) FROM job_executions e
                                WHERE e.finished_at >= p.week_start
                                  AND e.finished_at < p.week_end)
                FROM jobwarden_execution_partitions() p
                WHERE NOT p.is_default ORDER BY p.week_start OFFSET 2 LIMIT 1""").fetchone()
            conn.execute("CHECKPOINT")
        dropped = wal_and_time(url, f"DROP TABLE {oldest}")
        print(f"\nretention of one week: DELETE of {deleted[2]:,} executions {deleted[0]:.1f} s, "
              f"{deleted[1] / 1e6:.1f} MB WAL; DROP of a week's partition ({rows:,} "
              f"executions) {dropped[0] * 1000:.0f} ms, {dropped[1] / 1e3:.1f} kB WAL")
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
