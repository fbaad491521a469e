"""Unknown jobs by group: what a reconciler last said, and an index of unknown jobs.

Revision ID: 0077
Revises: 0075
Create Date: 2026-12-12

Needs review groups the jobs whose outcome is unknown by type, error code and what their
type's reconciler said of them (console/views/review.py), so that 10,000 of them are a
few rows to decide, not 200 pages of cards. A reconciler's "done" and "not done" settle
the job (marked completed, retried: audited as such); until now "unknown", and a
reconciler that raised, left no trace. `reconcile_verdict` keeps it on the job's row:
'unknown' (it could not tell) or 'error' (it failed, or answered something else), NULL
when no reconciler answered since the job last ran (a retry clears it: a verdict is of
the outcome it was asked about). Each change is also an audit row (`reconcile`).

No CHECK constraint on the values: its validation would read every job under a lock,
and only worker/ops/reconcile.py writes the column.

`background_jobs_unknown_idx (type, last_error_code, reconcile_verdict, id) WHERE status
= 'unknown'` counts the groups from the index alone and lists a group's jobs newest
first by a walk of it. It holds unknown jobs only, so the hot path never writes it: a
job enters it when its outcome is unknown, and leaves it when an operator decides.
The column is added without a default (no table rewrite); the index is built
CONCURRENTLY, outside the migration's transaction: workers keep writing meanwhile.
"""

from alembic import op

revision = "0077"
down_revision = "0075"
branch_labels = None
depends_on = None

INDEX = "background_jobs_unknown_idx"


def upgrade() -> None:
    op.execute("ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS reconcile_verdict text")
    with op.get_context().autocommit_block():
        # A build that failed half-way leaves an invalid index of this name behind.
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
        op.execute(f"CREATE INDEX CONCURRENTLY {INDEX} ON background_jobs "
                   "(type, last_error_code, reconcile_verdict, id) WHERE status = 'unknown'")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
    op.execute("ALTER TABLE background_jobs DROP COLUMN IF EXISTS reconcile_verdict")
