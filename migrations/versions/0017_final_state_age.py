"""A finished job's age is the time it reached its current final state.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01

Retention aged a job by `coalesce(completed_at, failed_at, cancelled_at, skipped_at)`, and
`jobwarden prune` by the same columns in another order. An operator's action keeps the
timestamps of the states a job left: a job that failed 60 days ago and was skipped today
has both `failed_at` and `skipped_at`, so retention took it for 60 days skipped and deleted
it at the next pass. `jobwarden_finished_at` picks the timestamp of the job's current
status instead, and both retention paths (the duty and `jobwarden prune`) order by it; each
transition into a final state sets that state's column (finish_executions, recovery, the
operator actions), so it is the moment the job got there. A row without it (written by
hand, or by code older than the column) falls back to `created_at`.

The function is a plain CASE, immutable and inlined: the index holds the same expression
the retention batch orders by. The index replaces background_jobs_finished_idx, built and
dropped CONCURRENTLY outside the migration's transaction so a large table is not locked.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(load_sql("jobwarden_finished_at", revision))
    with op.get_context().autocommit_block():
        # A build that failed half-way leaves an invalid index of this name behind.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_retention_idx")
        op.execute("""
            CREATE INDEX CONCURRENTLY background_jobs_retention_idx ON background_jobs
                (status, jobwarden_finished_at(status, completed_at, failed_at, cancelled_at,
                                               skipped_at, created_at), id)
                WHERE status IN ('completed', 'failed', 'cancelled', 'skipped')
        """)
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_finished_idx")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_finished_idx")
        op.execute("""
            CREATE INDEX CONCURRENTLY background_jobs_finished_idx ON background_jobs
                (status, (coalesce(completed_at, failed_at, cancelled_at, skipped_at)), id)
                WHERE status IN ('completed', 'failed', 'cancelled', 'skipped')
        """)
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_retention_idx")
    op.execute("DROP FUNCTION IF EXISTS jobwarden_finished_at(text, timestamptz, timestamptz, "
               "timestamptz, timestamptz, timestamptz)")
