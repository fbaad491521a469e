"""Retention removes ended batches: an index of batches by the moment they ended.

Revision ID: 0075
Revises: 0074
Create Date: 2026-12-10

Retention (worker/duties/retention.py) deletes a batch once it has ended, none of its
members is left and no callback job of it is still unfinished, and its end is older
than the shortest of the jobs' ages. Its end is when it completed, else when its opener
closed it (members that ended `unknown` keep it from completing), else when it was
opened (an opener that raised and committed anyway never closed it). The index holds
every batch by that moment, oldest first, so a pass reads the batches old enough and no
more, as the jobs' retention index does for jobs. Only the two moments are indexed, not
the counts: a member's count, in the transaction that writes its outcome, stays a HOT
update of the batch's row.
"""

from alembic import op

revision = "0075"
down_revision = "0074"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        # A build that failed half-way leaves an invalid index of this name behind.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS job_batches_ended_idx")
        op.execute("CREATE INDEX CONCURRENTLY job_batches_ended_idx ON job_batches "
                   "((coalesce(complete_at, closed_at, created_at)), id)")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS job_batches_ended_idx")
