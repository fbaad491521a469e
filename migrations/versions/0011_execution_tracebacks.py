"""Each execution keeps the handler's traceback (sanitized like errors, size-capped).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30

worker/engine/runner.py captures it where the handler's exception is classified
(`traceback.format_exception`, redacted by worker/core/sanitize.py, at most 8,000
characters), carries it on the Outcome and the completer's Completion, and
finish_executions stores it with the outcome; the console shows it collapsed on the
job's attempts timeline.
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE job_executions ADD COLUMN traceback text;")


def downgrade() -> None:
    op.execute("ALTER TABLE job_executions DROP COLUMN IF EXISTS traceback;")
