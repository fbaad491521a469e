"""What the rollup triggers cost on the completion path (run by hand; not a test).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \
        .venv/bin/python bench/bench_rollup.py --jobs 10000 --batch 100 --rounds 5

Creates the database `jobwarden_bench_rollup`, then per round: inserts --jobs running
jobs with their executions, and completes them with the worker's own batch statement
(`finish_executions`, --batch rows each, one transaction per statement, as the completer
commits them), once with the rollup triggers of migration 0009 enabled and once
disabled, alternating which goes first. Prints the time per statement for each and the
difference. `--which timings` toggles the history's timings triggers of migration 0086
instead, with jobs claimed as the current runtime claims them (no history row until the
end: finish_executions inserts it, which the trigger reads).
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
from jobwarden.worker.engine.completer import finish_params  # noqa: E402
from jobwarden.worker.store import db as dbmod  # noqa: E402
from jobwarden.worker.store.queries import Q  # noqa: E402

TRIGGERS = ("background_jobs_rollup_insert", "background_jobs_rollup_update",
            "background_jobs_rollup_delete")

SEED = """
WITH jobs AS (
    INSERT INTO background_jobs (queue, type, payload, status, attempts, execution_id,
        worker_id, started_at, heartbeat_at, lease_expires_at)
    SELECT 'queue_' || (g %% 3), 'type_' || (g %% 5), '{}', 'running', 1, gen_random_uuid(),
           'w', now(), now(), now() + interval '1 minute'
    FROM generate_series(1, %(jobs)s) g
    RETURNING id, execution_id, queue, type
)
INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                            scheduled_at, started_at)
SELECT id, execution_id, 1, queue, type, 'w', now(), now() FROM jobs
"""


TIMINGS_TRIGGERS = ("job_executions_timings_insert", "job_executions_timings_update")
#: Running jobs as the current runtime leaves them: no history row yet (migration 0061).
SEED_RUNNING = SEED.split("RETURNING")[0].replace("WITH jobs AS (\n", "")


def one_run(conn, jobs: int, batch: int, triggers: bool, which: str = "rollups") -> float:
    """Seconds spent completing `jobs` running jobs in `batch`-row statements."""
    state = "ENABLE" if triggers else "DISABLE"
    table, names = (("job_executions", TIMINGS_TRIGGERS) if which == "timings"
                    else ("background_jobs", TRIGGERS))
    for name in names:
        conn.execute(f"ALTER TABLE {table} {state} TRIGGER {name}")
    conn.execute("TRUNCATE background_jobs CASCADE")
    if which == "timings":
        conn.execute("TRUNCATE job_executions")
        conn.execute(SEED_RUNNING, {"jobs": jobs})
    else:
        conn.execute(SEED, {"jobs": jobs})
    conn.execute("VACUUM background_jobs")
    rows = conn.execute("SELECT id, execution_id FROM background_jobs ORDER BY id").fetchall()
    started = time.perf_counter()
    for i in range(0, len(rows), batch):
        conn.execute(Q.finish_executions, finish_params([
            {"job_id": job_id, "execution_id": execution_id, "status": "completed",
             "outcome": "completed", "error_code": None, "error": None, "delay": 0.0,
             "progress": None, "checkpoint": None}
            for job_id, execution_id in rows[i:i + batch]]))
    return time.perf_counter() - started


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--database", default="jobwarden_bench_rollup")
    p.add_argument("--which", choices=("rollups", "timings"), default="rollups",
                   help="the triggers toggled: background_jobs' rollups or the history's "
                        "timings (migration 0086)")
    args = p.parse_args(argv)
    server = dbmod.normalize_url(os.environ.get("DATABASE_URL") or dbmod.database_url())
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{args.database}"')
    url = _with_dbname(server, args.database)
    dbmod.migrate(url)
    timings: dict[bool, list[float]] = {True: [], False: []}
    with psycopg.connect(url, autocommit=True) as conn:
        for r in range(args.rounds):
            for triggers in ((True, False) if r % 2 == 0 else (False, True)):
                timings[triggers].append(one_run(conn, args.jobs, args.batch, triggers,
                                                args.which))
    statements = args.jobs / args.batch
    on, off = statistics.median(timings[True]), statistics.median(timings[False])
    print(f"{args.jobs:,} jobs completed in {args.batch}-row statements, "
          f"median of {args.rounds} alternating rounds:")
    print(f"  triggers on : {on:6.2f} s  ({on / statements * 1000:.2f} ms per statement)")
    print(f"  triggers off: {off:6.2f} s  ({off / statements * 1000:.2f} ms per statement)")
    print(f"  cost: {(on - off) / statements * 1000:+.2f} ms per statement "
          f"({(on - off) / off * 100:+.0f}%)")
    print("  rounds on :", " ".join(f"{t:.2f}" for t in timings[True]))
    print("  rounds off:", " ".join(f"{t:.2f}" for t in timings[False]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
