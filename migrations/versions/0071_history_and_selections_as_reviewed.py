"""A bulk action keeps to each job's status at its review.

Revision ID: 0071
Revises: 0070
Create Date: 2026-12-06

`console_selection_jobs` gains `statuses`: each selected job's status when the selection
was stored, in the same places as `job_ids`. A bulk action compared a job with every
status the action may start from, so a skip reviewed as "failed" also skipped jobs another
operator had retried meanwhile (pending, which a skip allows); now each chunk acts on a
job only in the status the review showed (worker/store/sql/operations.sql,
tests/integration/test_bulk_after_review.py). A selection stored before this migration
has no statuses: its jobs are compared as before. Adding a nullable column rewrites
nothing.
"""

from alembic import op

revision = "0071"
down_revision = "0070"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE console_selection_jobs ADD COLUMN statuses text[]")


def downgrade() -> None:
    op.execute("ALTER TABLE console_selection_jobs DROP COLUMN IF EXISTS statuses")
