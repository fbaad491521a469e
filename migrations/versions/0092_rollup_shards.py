"""The outcome rollups in shards: two writers of outcomes never wait for each other.

Revision ID: 0092
Revises: 0091
Create Date: 2026-12-07

Every finish adds its outcomes to `job_minute_counts` (per minute, type and outcome) and
its executions' times to `job_timings` (per 5 minutes, type and bucket), by upsert. All
finishes of a type in one minute added to the same rows, so a second writer (a worker's
second outcome writer, or any other worker's) waited on the first one's row lock until
it committed: in a one-process drain a writer spent about a sixth of its time in
`Lock:transactionid` (pg_stat_activity, sampled). Each row now also has a `shard` (part
of its key): a transaction adds to a shard no other open transaction holds
(`jobwarden_rollup_shard`, by advisory lock), and the fold gathers past minutes into
shard 0. Every reader already sums rows per key, so it reads the same figures.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0092"
down_revision = "0091"
branch_labels = None
depends_on = None

KEYS = {
    "job_minute_counts": "minute, queue, type, outcome, error_code",
    "job_timings": "period, queue, type, measure, bucket",
}
# Gathering a table's shards into shard 0 (the downgrade): its sums, as the fold's.
GATHER = {
    "job_minute_counts": ("jobs", "sum(jobs)", "jobs = m.jobs + EXCLUDED.jobs"),
    "job_timings": ("executions, raised, max_ms", "sum(executions), sum(raised), max(max_ms)",
                    "executions = m.executions + EXCLUDED.executions, "
                    "raised = m.raised + EXCLUDED.raised, "
                    "max_ms = greatest(m.max_ms, EXCLUDED.max_ms)"),
}


def upgrade() -> None:
    for table, key in KEYS.items():
        op.execute(f"ALTER TABLE {table} ADD COLUMN shard smallint NOT NULL DEFAULT 0")
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey "
                   f"PRIMARY KEY ({key}, shard)")
    for function in ("jobwarden_rollup_shard", "jobwarden_rollup_update",
                     "jobwarden_timings_record", "jobwarden_rollup_fold"):
        op.execute(load_sql(function, revision))


def downgrade() -> None:
    op.execute(load_sql("jobwarden_rollup_update", "0070"))
    op.execute(load_sql("jobwarden_timings_record", "0090"))
    op.execute(load_sql("jobwarden_rollup_fold", "0086"))
    op.execute("DROP FUNCTION jobwarden_rollup_shard()")
    for table, key in KEYS.items():
        columns, sums, update = GATHER[table]
        op.execute(f"""
            WITH gone AS (DELETE FROM {table} WHERE shard <> 0 RETURNING *)
            INSERT INTO {table} AS m ({key}, {columns}, shard)
            SELECT {key}, {sums}, 0 FROM gone GROUP BY {key}
            ON CONFLICT ({key}, shard) DO UPDATE SET {update}""")
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
        op.execute(f"ALTER TABLE {table} DROP COLUMN shard")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({key})")
