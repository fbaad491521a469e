"""Job rollups: current counts and per-minute outcomes, kept by the statements that change jobs.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30

The console's overview, trend chart, usual-rate baseline and /metrics must not count
every job per request (an index-only scan that grows with the table). Two tables keep the
answers instead, written by statement-level triggers on `background_jobs` that read the
statement's transition tables (docs/architecture.md §3, "Rollups"):

* `job_count_deltas` — signed deltas of the number of jobs per (status, queue, type).
  Append-only, so concurrent enqueues in long application transactions never wait on a
  shared counter row; the current count is the sum. A statement that finds the table
  longer than a few thousand rows folds it into one row per key (DELETE ... RETURNING
  sums exactly the rows it removed, so a concurrent fold cannot double-count; an
  advisory try-lock keeps folds from waiting on one another).
* `job_minute_counts` — jobs that reached an outcome (completed, failed, retried,
  cancelled, skipped, unknown) per (minute, queue, type, outcome): one upsert per key and
  statement, in key order so two statements never deadlock. Failures, retries and
  unknown outcomes also carry the job's error code, for the failed groups' streaks.
  Minutes older than 8 days are dropped by the fold (the usual-rate baseline looks back
  7 days).

Because the triggers see whatever rows a statement changed, they count single-row
compare-and-set outcomes, batched completions, recovery and operator actions alike,
without any of those statements knowing about them.

Measured cost on the completion path (bench/bench_rollup.py: 10,000 running jobs
completed by the worker's own batch statement, finish_executions, 100 rows a statement,
one transaction each, triggers enabled vs disabled, alternating which goes first, on the
shared 2-core machine, load average about 3): median of 9 rounds 7.45 ms per statement
with the triggers against 7.10 ms without, +0.35 ms per 100-row statement (+5%, about
3.5 µs per job); rounds 0.66-0.96 s on, 0.65-0.82 s off. One-row statements (2,000 jobs,
5 rounds): 1.15 vs 0.92 ms, +0.23 ms per statement (+25%). Earlier runs with a plain
100-row UPDATE instead of finish_executions gave +0.13 to +2.7 ms per statement, the
high figure beside a 10M-row load: rerun bench_rollup.py before relying on a figure.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

#: The functions this revision's SQL files define (worker/store/sql/schema/revisions/0009).
FUNCTIONS = ("jobwarden_rollup_fold", "jobwarden_rollup_rows", "jobwarden_rollup_update",
             "jobwarden_rollup_truncate", "jobwarden_rollup_rebuild")


def upgrade() -> None:
    op.execute("""
        CREATE TABLE job_count_deltas (
            id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            status  text NOT NULL,
            queue   text NOT NULL,
            type    text NOT NULL,
            jobs    bigint NOT NULL
        );
        CREATE TABLE job_minute_counts (
            minute  timestamptz NOT NULL,
            queue   text NOT NULL,
            type    text NOT NULL,
            outcome text NOT NULL,
            error_code text NOT NULL DEFAULT '',
            jobs    bigint NOT NULL,
            PRIMARY KEY (minute, queue, type, outcome, error_code)
        );
        -- Failed groups: each code's streak and its last hour, without reading jobs.
        CREATE INDEX job_minute_counts_error_idx ON job_minute_counts (error_code, minute)
            WHERE error_code <> '';
    """)
    for function in FUNCTIONS:
        op.execute(load_sql(function, revision))
    op.execute(load_sql("rollup_triggers", revision))
    op.execute("""
        -- The overview's "recovered in the last hour" without reading the hour's executions.
        CREATE INDEX job_executions_lost_idx ON job_executions (finished_at)
            WHERE outcome = 'worker_lost';

        SELECT jobwarden_rollup_rebuild();
    """)


def downgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS job_executions_lost_idx;
        DROP TRIGGER IF EXISTS background_jobs_rollup_truncate ON background_jobs;
        DROP TRIGGER IF EXISTS background_jobs_rollup_update ON background_jobs;
        DROP TRIGGER IF EXISTS background_jobs_rollup_delete ON background_jobs;
        DROP TRIGGER IF EXISTS background_jobs_rollup_insert ON background_jobs;
        DROP FUNCTION IF EXISTS jobwarden_rollup_rebuild();
        DROP FUNCTION IF EXISTS jobwarden_rollup_truncate();
        DROP FUNCTION IF EXISTS jobwarden_rollup_update();
        DROP FUNCTION IF EXISTS jobwarden_rollup_rows();
        DROP FUNCTION IF EXISTS jobwarden_rollup_fold();
        DROP TABLE IF EXISTS job_minute_counts;
        DROP TABLE IF EXISTS job_count_deltas;
    """)
