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

revision = "0061"
down_revision = "0060"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE VIEW job_executions_all AS
        SELECT e.id, e.job_id, e.execution_id, e.attempt, e.queue, e.type, e.worker_id,
               e.scheduled_at, e.started_at, e.heartbeat_at, e.finished_at, e.outcome,
               e.error_code, e.error, e.duration_ms, e.traceback
        FROM job_executions e
        -- Not a row opened by an older runtime's claim for an execution still running.
        WHERE e.finished_at IS NOT NULL
           OR NOT EXISTS (SELECT 1 FROM background_jobs r
                          WHERE r.id = e.job_id AND r.status = 'running'
                            AND r.execution_id = e.execution_id)
        UNION ALL
        -- A running execution: its job row is its record until it ends (the claim left
        -- the attempt's number, its worker, when it started and when the job had become
        -- available; heartbeats keep heartbeat_at).
        SELECT NULL::bigint, j.id, j.execution_id, j.attempts, j.queue, j.type, j.worker_id,
               j.available_at, j.started_at, j.heartbeat_at, NULL::timestamptz, NULL::text,
               NULL::text, NULL::text, NULL::float8, NULL::text
        FROM background_jobs j
        WHERE j.status = 'running';
    """)


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
