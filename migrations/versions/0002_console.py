"""Console indexes: status counts, failed groups by type, idempotency-key search.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Measured with bench/bench_console.py at 1,000,000 jobs: the overview's per-(status,
queue, type) counts become a grouped index-only scan in index order (no hashing), the
failed groups an index-only scan of the failed jobs, and the jobs list's search by
idempotency key an index lookup instead of a scan.
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE INDEX background_jobs_console_counts_idx ON background_jobs (status, queue, type);
CREATE INDEX background_jobs_failed_type_idx ON background_jobs (last_error_code, type)
    INCLUDE (failed_at) WHERE status = 'failed';
CREATE INDEX background_jobs_idempotency_key_idx ON background_jobs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
"""

DOWNGRADE = """
DROP INDEX IF EXISTS background_jobs_idempotency_key_idx;
DROP INDEX IF EXISTS background_jobs_failed_type_idx;
DROP INDEX IF EXISTS background_jobs_console_counts_idx;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
