"""Fair share across tenants: each job's fair key, and the index its claim walks.

Revision ID: 0088
Revises: 0087
Create Date: 2026-12-06

A type declared with `fair_key="tenant.id"` (a dotted payload path) stores that value of
each job's payload in `fair_key` at enqueue ('' when the payload lacks it); every other
job keeps NULL, so nothing changes for them: no default, no table rewrite, and the
partial index below holds none of their rows. The fair claim (claim_fair_jobs) walks the
index's distinct keys one probe each (a loose index scan) and takes each key's oldest
runnable jobs, so one key's backlog never hides another key's first job.
`job_types` keeps the declaration (path and weights) for processes that enqueue without
the handler. The index is built CONCURRENTLY, outside the migration's transaction.
"""

from alembic import op

revision = "0088"
down_revision = "0087"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS fair_key text")
    op.execute("ALTER TABLE job_types ADD COLUMN IF NOT EXISTS fair_key text")
    op.execute("ALTER TABLE job_types ADD COLUMN IF NOT EXISTS fair_weights jsonb")
    with op.get_context().autocommit_block():
        # A build that failed half-way leaves an invalid index of this name behind.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_fair_idx")
        op.execute("""
            CREATE INDEX CONCURRENTLY background_jobs_fair_idx ON background_jobs
                (fair_key, jobwarden_claim_rank(available_at, priority), id)
                WHERE status = 'pending' AND fair_key IS NOT NULL
        """)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_fair_idx")
    op.execute("ALTER TABLE job_types DROP COLUMN IF EXISTS fair_weights")
    op.execute("ALTER TABLE job_types DROP COLUMN IF EXISTS fair_key")
    op.execute("ALTER TABLE background_jobs DROP COLUMN IF EXISTS fair_key")
