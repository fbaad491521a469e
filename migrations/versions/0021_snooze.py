"""Snooze: an execution may put its job off without spending an attempt.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01

`raise Snooze(seconds)` (or `ctx.snooze(seconds)`) ends an execution with the outcome
`snoozed`: the job goes back to `pending` for that long, its attempt given back
(worker/core/transitions.py). `background_jobs.snoozes` counts them, so a type's
`max_snoozes` can stop a job that would snooze for ever; a default of 0 is a
catalogue-only change (PostgreSQL 11+ stores it without rewriting the table).

The rollups count a snooze as itself (`snoozed`, no error code), never as a retry: the
trigger of migration 0018 reads the execution's recorded outcome for every move from
`running` to `pending` already, and now tells the three kinds apart (retried, snoozed,
handed back). The outcome's CHECK gains the value, added NOT VALID and validated outside
the migration's transaction (as in 0020: workers keep writing meanwhile).
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

CHECK = "job_executions_outcome_check"
OUTCOMES = ("completed", "retry", "failed", "skipped", "cancelled", "unknown", "worker_lost",
            "timeout", "handed_back")


def _outcome_check(outcomes: tuple[str, ...]) -> None:
    listed = ", ".join(f"'{o}'" for o in outcomes)
    op.execute(f"ALTER TABLE job_executions DROP CONSTRAINT IF EXISTS {CHECK}")
    op.execute(f"ALTER TABLE job_executions ADD CONSTRAINT {CHECK} "
               f"CHECK (outcome IS NULL OR outcome IN ({listed})) NOT VALID")
    with op.get_context().autocommit_block():
        op.execute(f"ALTER TABLE job_executions VALIDATE CONSTRAINT {CHECK}")


def upgrade() -> None:
    op.execute("ALTER TABLE background_jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0")
    op.execute(load_sql("jobwarden_rollup_update", revision))
    _outcome_check((*OUTCOMES, "snoozed"))


def downgrade() -> None:
    op.execute("DELETE FROM job_minute_counts WHERE outcome = 'snoozed'")
    op.execute("UPDATE job_executions SET outcome = 'retry' WHERE outcome = 'snoozed'")
    _outcome_check(OUTCOMES)
    op.execute(load_sql("jobwarden_rollup_update", "0018"))
    op.execute("ALTER TABLE background_jobs DROP COLUMN snoozes")
