"""Time to start and run time per 5 minutes, kept by a trigger: the SLA page reads a rollup.

Revision ID: 0086
Revises: 0084
Create Date: 2026-12-06

The SLA page read and sorted every execution of the last hour for its percentiles (118,916
in a drill at a million jobs: 1.9 s over HTTP against 0.5 s for Failed), so it grew
slower as traffic grew. `job_timings` holds, per 5 minutes an execution started in
(`jobwarden_timing_period`), queue and type, how many executions waited (scheduled to
started) and ran (duration_ms) for how long, in log buckets of ratio 2^(1/8)
(`jobwarden_timing_bucket`): a percentile read as its bucket's upper edge is at most
9.05% high. Its size per period is bounded by the buckets the times fall in, not by the
number of executions.

A statement-level AFTER INSERT trigger on job_executions (and AFTER UPDATE, for the rows
an older runtime opened and a current one closes) upserts a statement's executions, one
row per key in key order, as job_minute_counts' trigger does. job_executions is
partitioned (migration 0066): the trigger is on the parent, where a statement-level
trigger with a transition table fires for every statement that names the parent (all
writers do) and sees the rows of every partition they went to. The rollup fold drops
periods older than two days, as it drops job_minute_counts' minutes older than eight.

Per 5 minutes, not per minute: the page's intervals are 5 minutes, and on 2,000,000 jobs
with a busy hour (115,000 executions of 10 types, waits spread over 0-100 s) a per-minute
hour was 49,966 rows to read and sort (150-300 ms, the sort spilling to disk); per 5
minutes, 12,046 rows and 34-82 ms with 224,247 executions in the hour, on a machine at
load 9-10 (docs/guide/console.md, "SLA").

Measured cost on the completion path (`bench/bench_rollup.py --which timings`: 10,000
running jobs completed by finish_executions in 100-row statements, the timings triggers
enabled vs disabled, alternating, 9 rounds, shared 2-core machine at load 2-6): 3.78 ms
per statement against 3.27 ms, +0.51 ms (+16%, about 5 us per execution; the rollups of
migration 0009 measured +0.35 ms the same way). Before the period function was inlined
(it read a timestamptz's epoch, only stable), the upsert alone took 3.7 ms for 115 rows.

The table is filled from the last hour of history (the page's) under a SHARE lock on
job_executions (workers finishing executions wait for it), then the triggers are created
in the same transaction: no execution falls between them.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0086"
down_revision = "0084"
branch_labels = None
depends_on = None

FUNCTIONS = ("jobwarden_timing_period", "jobwarden_timing_bucket", "jobwarden_timings_record",
             "jobwarden_timings_truncate", "jobwarden_timings_rebuild")


def upgrade() -> None:
    op.execute("""
        CREATE TABLE job_timings (
            period     timestamptz NOT NULL,
            queue      text NOT NULL,
            type       text NOT NULL,
            measure    text NOT NULL CONSTRAINT job_timings_measure_check
                           CHECK (measure IN ('wait', 'run')),
            bucket     integer NOT NULL,
            executions bigint NOT NULL,
            raised     bigint NOT NULL,
            max_ms     float8 NOT NULL,
            PRIMARY KEY (period, queue, type, measure, bucket)
        );
    """)
    for function in FUNCTIONS:
        op.execute(load_sql(function, revision))
    op.execute(load_sql("jobwarden_rollup_fold", revision))
    op.execute("SELECT jobwarden_timings_rebuild(interval '1 hour')")
    op.execute(load_sql("timings_triggers", revision))


def downgrade() -> None:
    for trigger in ("insert", "update", "truncate"):
        op.execute(f"DROP TRIGGER IF EXISTS job_executions_timings_{trigger} ON job_executions")
    op.execute(load_sql("jobwarden_rollup_fold", "0009"))
    op.execute("ALTER FUNCTION jobwarden_rollup_fold() SET jit = off")  # as 0067 left it
    op.execute("DROP FUNCTION IF EXISTS jobwarden_timings_rebuild(interval)")
    op.execute("DROP FUNCTION IF EXISTS jobwarden_timings_truncate()")
    op.execute("DROP FUNCTION IF EXISTS jobwarden_timings_record()")
    op.execute("DROP FUNCTION IF EXISTS jobwarden_timing_bucket(float8)")
    op.execute("DROP FUNCTION IF EXISTS jobwarden_timing_period(timestamptz)")
    op.execute("DROP TABLE IF EXISTS job_timings")
