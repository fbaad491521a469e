"""Periodic jobs: one row per scheduled job type, its next tick and its last run.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30

Workers publish the schedules their handlers declare (`@job(..., schedule=...)`) and
enqueue each tick's job by a compare-and-set on `next_run_at`, so however many workers
run, one job is enqueued per tick (worker/duties/scheduler.py).
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE job_schedules (
            type          text PRIMARY KEY,
            cron          text NOT NULL,
            timezone      text NOT NULL DEFAULT 'UTC',
            catch_up      boolean NOT NULL DEFAULT false,
            payload       jsonb NOT NULL DEFAULT '{}'::jsonb,
            paused        boolean NOT NULL DEFAULT false,
            next_run_at   timestamptz NOT NULL,
            last_run_at   timestamptz,
            last_job_id   bigint,
            published_by  text NOT NULL,
            published_at  timestamptz NOT NULL DEFAULT now()
        )
    """)
    op.execute("CREATE INDEX job_schedules_due_idx ON job_schedules (next_run_at) "
               "WHERE NOT paused")


def downgrade() -> None:
    op.execute("DROP TABLE job_schedules")
