"""Per-key serialization: at most one running job per concurrency_key.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

The claim query skips keys that already have a running job; this unique index is the
last line of defence when two workers claim two jobs of one key at the same instant
(the later claim fails and is retried).
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE UNIQUE INDEX background_jobs_concurrency_running_idx
            ON background_jobs (concurrency_key)
            WHERE status = 'running' AND concurrency_key IS NOT NULL;
        CREATE INDEX background_jobs_concurrency_key_idx
            ON background_jobs (concurrency_key, status)
            WHERE concurrency_key IS NOT NULL;
    """)


def downgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS background_jobs_concurrency_key_idx;
        DROP INDEX IF EXISTS background_jobs_concurrency_running_idx;
    """)
