"""Execution history written once, when the execution ends.

Revision ID: 0061
Revises: 0060
Create Date: 2026-12-01

A claim inserted a `job_executions` row for every execution, and its end updated it (a
non-HOT update: a second entry in each of the table's indexes), while the job row held
the same facts (execution id, worker, started_at, heartbeat, lease) all along. Now a
running execution lives on its job row only, and `finish_executions`, the one statement
every way out of `running` goes through (completer, in-transaction completion,
hand-back, recovery), inserts its history row once, with its outcome. Heartbeats write
only the job row. The rollup triggers read the outcome that same statement recorded, as
before (migration 0018).

`job_executions_all` is the history plus the running executions drawn from
`background_jobs`, for what wants to see running attempts (a job's attempts, the SLA
and time-to-start figures, the alerts' flow). Its running rows have no `id`.

The executions running now keep their open rows: `finish_executions` closes a row that
exists (an execution claimed before this migration, or by a worker of an older version
during a rolling deploy) and inserts one only where none does. The view leaves such an
open row out of its history half while its execution runs, so it is shown once, from the
job row.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0061"
down_revision = "0060"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(load_sql("job_executions_all", revision))


def downgrade() -> None:
    # The older runtime opens a row at the claim: give the running executions theirs.
    op.execute("""
        DROP VIEW job_executions_all;
        INSERT INTO job_executions
            (job_id, execution_id, attempt, queue, type, worker_id, scheduled_at,
             started_at, heartbeat_at)
        SELECT j.id, j.execution_id, j.attempts, j.queue, j.type, coalesce(j.worker_id, ''),
               j.available_at, coalesce(j.started_at, now()), j.heartbeat_at
        FROM background_jobs j
        WHERE j.status = 'running'
          AND NOT EXISTS (SELECT 1 FROM job_executions e
                          WHERE e.execution_id = j.execution_id);
    """)
