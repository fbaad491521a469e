"""One function says how the count rollup counts a status: running as pending.

Revision ID: 0095
Revises: 0094
Create Date: 2026-12-09

Migration 0094 made `job_count_deltas` count a running job as `pending`, and wrote that
rule out at each of its eight writers and readers (the fold, both branches of the
INSERT/DELETE trigger, three places of the UPDATE trigger, the rebuild and the
console's counts). `jobwarden_counted_status(status)` is now the one place: an
immutable SQL function the planner inlines, so the statements' plans and costs are
those of the CASE it holds. The four functions are replaced by the same statements
calling it; no row changes.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0095"
down_revision = "0094"
branch_labels = None
depends_on = None

FUNCTIONS = ("jobwarden_rollup_fold", "jobwarden_rollup_rows", "jobwarden_rollup_update",
             "jobwarden_rollup_rebuild")


def upgrade() -> None:
    op.execute(load_sql("jobwarden_counted_status", revision))
    for function in FUNCTIONS:
        op.execute(load_sql(function, revision))


def downgrade() -> None:
    for function in FUNCTIONS:
        op.execute(load_sql(function, "0094"))
    op.execute("DROP FUNCTION jobwarden_counted_status(text)")
