"""Indexes the hot path does not read stop being written by every job.

Revision ID: 0062
Revises: 0061
Create Date: 2026-12-01

A job's status changes twice (`pending -> running -> completed`), each a non-HOT update,
so every full index on `background_jobs` took three entries per job. Three of them
served no statement of the hot path:

- `background_jobs_console_counts_idx (status, queue, type)`: the console's counts come
  from the rollups (migration 0009) since; its last readers, the queue pause's "is this
  queue known" probe, now read the rollup too, and `queues_known` (a DISTINCT over every
  job, rare) reads the table.
- `background_jobs_status_idx (status, id)`: the jobs list by status, newest first. Now
  `background_jobs_settled_status_idx`, partial on the statuses no job of the hot path
  passes through (failed, cancelled, skipped, unknown). Pending, running and completed
  lists walk other indexes: running jobs `background_jobs_lease_idx` (partial on
  running), the others the primary key backwards (newest first, most rows match).
- `background_jobs_type_idx (type, status)`: a type's failed, cancelled, skipped or
  unknown jobs, and the retrying groups' pending and running jobs of a type and error
  code. Now `background_jobs_type_status_idx`, partial on those statuses or a job
  that has an error code (a retried job has one, a job that never failed has none).

Docs/architecture.md §3 lists every index and who needs it. The new indexes are built
before the old ones go, all CONCURRENTLY outside the migration's transaction, so
enqueues, claims and outcomes keep running.
"""

from alembic import op

revision = "0062"
down_revision = "0061"
branch_labels = None
depends_on = None

SETTLED = "status IN ('failed', 'cancelled', 'skipped', 'unknown')"


def upgrade() -> None:
    with op.get_context().autocommit_block():
        # A build that failed half-way leaves an invalid index of its name behind.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_settled_status_idx")
        op.execute(f"""
            CREATE INDEX CONCURRENTLY background_jobs_settled_status_idx
                ON background_jobs (status, id) WHERE {SETTLED}
        """)
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_type_status_idx")
        op.execute(f"""
            CREATE INDEX CONCURRENTLY background_jobs_type_status_idx
                ON background_jobs (type, status)
                WHERE {SETTLED} OR last_error_code IS NOT NULL
        """)
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_status_idx")
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_type_idx")
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_console_counts_idx")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_console_counts_idx")
        op.execute("CREATE INDEX CONCURRENTLY background_jobs_console_counts_idx "
                   "ON background_jobs (status, queue, type)")
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_type_idx")
        op.execute("CREATE INDEX CONCURRENTLY background_jobs_type_idx "
                   "ON background_jobs (type, status)")
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_status_idx")
        op.execute("CREATE INDEX CONCURRENTLY background_jobs_status_idx "
                   "ON background_jobs (status, id)")
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_type_status_idx")
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_settled_status_idx")
