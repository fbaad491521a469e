"""Partial indexes of failed jobs, for the console's failed groups of one type or code.

Revision ID: 0040
Revises: 0030
Create Date: 2026-12-01

`/failed?type=…` and `/failed/group?type=…` (the pages an alert naming a type opens) group
one type's failed jobs by error code, pick each group's latest failure, and list the
type's (or the type and code's) failed jobs newest first. The indexes they had lead by
error code or hold every status (`(type, status)`), so each of those reads the row of
every failed job of the type: 300–950 ms at 100,000 failed jobs. `(type, last_error_code,
failed_at, id) WHERE status = 'failed'` answers all of them from the index: the groups in
code order, the latest failure of a (type, code) by one backward probe, and a page of ids
without reading a row it does not show.

`/failed/group?code=…` (a group's page, of every type) lists the code's failed jobs newest
first; without statistics the planner took `(last_error_code, failed_at) WHERE failed`
and read every job of the group to sort them by id (5,000 heap pages for a group of
5,000 at 10,000,000 jobs: 60–95 ms, 5 times that for 25,000). `(last_error_code, id)
WHERE status = 'failed'` gives the newest page by a backward walk of the index.

Both hold failed jobs only, so the hot path never writes them: pending → running →
completed (or a retry back to pending) never makes a row that matches its predicate,
and those updates change `status` already, which other indexes hold (no HOT update is
lost). A job enters them once, when it fails for good, and leaves them when an operator
retries or skips it, or retention deletes it.

Built CONCURRENTLY, outside the migration's transaction: workers keep writing meanwhile.
"""

from alembic import op

revision = "0040"
down_revision = "0030"
branch_labels = None
depends_on = None

INDEXES = {
    "background_jobs_failed_by_type_idx": "(type, last_error_code, failed_at, id)",
    "background_jobs_failed_code_id_idx": "(last_error_code, id)",
}


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for name, columns in INDEXES.items():
            # A build that failed half-way leaves an invalid index of this name behind.
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY {name} ON background_jobs {columns} "
                       "WHERE status = 'failed'")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
