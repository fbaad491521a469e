"""Priorities age: the claim walks pending jobs by a rank that mixes priority and wait.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-30

A job's effective priority is `priority + wait / AGING` (AGING = 10 seconds of waiting
per priority level). Ordering by that, highest first, is ordering by

    rank = available_at - priority * AGING        (lowest first)

which does not change while the job waits: it is a key an index can hold, so the claim
stays a walk of one index that stops after its batch, with no update of waiting rows and
no table rewrite. `jobwarden_claim_rank` computes it. It is written with operators that
are all immutable (the UTC wall clock of a timestamptz, then timestamp - interval), so
PostgreSQL accepts it in an index and inlines it into the claim's ORDER BY and the index
definition alike. `extract(epoch FROM timestamptz)` would give the same order, but it is
only STABLE (extract depends on TimeZone for other fields): declared IMMUTABLE around it,
the function could not be inlined and every inserted job would pay a SQL function call
(about two thirds more time for a 200,000-row insert into a table with only that index).

The rank replaces background_jobs_claim_idx (priority DESC, available_at, id): no other
statement orders pending jobs that way (the console and /metrics aggregate over pending
rows by status), and keeping both would cost every enqueue a second index entry.
Workers older than this migration order by the dropped index's key and sort the backlog
on each claim until they are upgraded: upgrade them right after migrating.

AGING lives in the function body and so in the index. Changing it takes a migration that
replaces the function and rebuilds the index (REINDEX INDEX CONCURRENTLY); a function
changed without the rebuild leaves an index ordered by the old rank.

The index leads with `status`, a constant in it, so that its first column is a plain one.
The planner costs an index scan by the physical correlation of the index's first column.
An expression's figure comes only from ANALYZE rows that satisfy the index predicate,
and there are none when statistics were taken with no job pending: the walk would then
be costed as random reads while the other indexes leading with `status` (jobs by status,
the console's counts) keep that column's figure, and a scan of one of those plus a sort
of every pending job would look cheaper. Leading with `status`, the walk gets the same
figure as they do and needs no sort, so it wins whatever the statistics say
(tests/integration/test_claim_plan.py sets up exactly those statistics).

Both indexes are built and dropped CONCURRENTLY, outside the migration's transaction, so
migrating a large table does not block enqueues while the table is scanned.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(load_sql("jobwarden_claim_rank", revision))
    with op.get_context().autocommit_block():
        # A build that failed half-way leaves an invalid index of this name behind.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_claim_rank_idx")
        op.execute("""
            CREATE INDEX CONCURRENTLY background_jobs_claim_rank_idx ON background_jobs
                (status, jobwarden_claim_rank(available_at, priority), id)
                WHERE status = 'pending'
        """)
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_claim_idx")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_claim_idx")
        op.execute("""
            CREATE INDEX CONCURRENTLY background_jobs_claim_idx ON background_jobs
                (priority DESC, available_at, id) WHERE status = 'pending'
        """)
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS background_jobs_claim_rank_idx")
    op.execute("DROP FUNCTION IF EXISTS jobwarden_claim_rank(timestamptz, integer)")
