"""The history indexes execution ids of open rows only: one random index entry less.

Revision ID: 0093
Revises: 0092
Create Date: 2026-12-07

Every finish inserts its executions' history rows, and `job_executions_execution_idx`
took an entry for each: a random uuid, so a random leaf page of an index as large as the
history (a page read and, after each checkpoint, a full page written to the WAL). Its
readers now find a finished execution by its job (`job_executions_job_idx`): the refused
outcomes' explanation, the retention of log lines and the rollup trigger's outcome of a
move back to pending. The finish still closes the open rows a runtime from before
migration 0061 left by their execution id: they alone keep an entry.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0093"
down_revision = "0092"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(load_sql("jobwarden_rollup_update", revision))
    op.execute("DROP INDEX IF EXISTS job_executions_execution_idx")
    op.execute("CREATE INDEX job_executions_open_idx ON job_executions (execution_id) "
               "WHERE finished_at IS NULL")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS job_executions_open_idx")
    op.execute("CREATE INDEX job_executions_execution_idx ON job_executions (execution_id)")
    op.execute(load_sql("jobwarden_rollup_update", "0092"))
