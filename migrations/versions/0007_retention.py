"""Retention finds old finished jobs by one index, oldest first.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30

The retention duty (worker/duties/retention.py) deletes, in small batches, finished jobs older
than their status's age. Without this index each batch would walk every finished job of
the status to find none old enough; with it a batch is a range scan that stops at the
cutoff.
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE INDEX background_jobs_finished_idx ON background_jobs
            (status, (coalesce(completed_at, failed_at, cancelled_at, skipped_at)), id)
            WHERE status IN ('completed', 'failed', 'cancelled', 'skipped')
    """)


def downgrade() -> None:
    op.execute("DROP INDEX background_jobs_finished_idx")
