"""Each attempt's log lines, kept beside its execution.

Revision ID: 0087
Revises: 0086
Create Date: 2026-12-06

`job_execution_logs`: one row per execution whose handler logged (most log nothing and
have none), written in the transaction that writes the execution's outcome
(worker/engine/completer.py), so the outcome and its lines are kept together or not at
all. A side table, not a column of `job_executions`: the history rows stay small, and
the claim, heartbeat and finish never read these. `lines` is a JSON array of
[unix time, level, logger, message], redacted and capped at the worker
(worker/engine/attempt_log.py); `dropped` counts the lines past the cap. `finished_at`
is the execution's (the same transaction's now()): retention deletes the rows whose
execution is gone, those old enough first (worker/duties/partitions.py).
"""

from alembic import op

revision = "0087"
down_revision = "0086"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE job_execution_logs (
            execution_id uuid        PRIMARY KEY,
            job_id       bigint      NOT NULL,
            finished_at  timestamptz NOT NULL,
            lines        jsonb       NOT NULL,
            dropped      integer     NOT NULL DEFAULT 0
        );
        CREATE INDEX job_execution_logs_finished_idx ON job_execution_logs (finished_at);
    """)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS job_execution_logs")
