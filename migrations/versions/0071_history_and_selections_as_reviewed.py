"""A kept job keeps every attempt; a bulk action keeps to each job's status at its review.

Revision ID: 0071
Revises: 0070
Create Date: 2026-12-06

History. Retention keeps a job by the moment it reached its current status (migration
0017), but dropped a week of its history (`jobwarden_drop_execution_partitions`,
migration 0066) on the week's own age: a job an operator retried weeks after it failed,
then failed again or completed, lost its first attempts while the job itself was kept.
Now a week past the history's age is dropped only when no job still in background_jobs
has an execution in it (whatever its status: retention has deleted every job it does not
keep, in the same pass, before it drops weeks); such a week waits whole until those jobs
go. The rows are not moved out instead: a week's range has no other partition to take
them (the default's CHECK bounds it below the cutover, and widening it would make every
new week scan the default), and moving is the per-row DELETE and WAL that partitioning
exists to avoid. Only a job whose life spans more than the history's age (retried long
after failing, unknown for months) holds a week, so few do; the worst case, one such job
holds one week (and every deleted job's rows in it) for as long as it is kept.

The check reads indexes only, never the week whole: the week's lowest and highest job id
(its job index, from either end), then each live job in that id range, by the primary
key, probes the week's job index once (a LATERAL with LIMIT, which the planner cannot
turn into a hash join over the week). Live jobs in a week's id range were created before
the week ended: few, with retention working. A week of 1,000,000 executions with 50,000
live jobs in its id range, none of them in it (every probe a miss), was checked and
dropped in 91-125 ms (three runs on the shared test server, 2026-12-06), reading neither
table whole. tests/integration/test_history_partitions.py.

Selections. `console_selection_jobs` gains `statuses`: each selected job's status when
the selection was stored, in the same places as `job_ids`. A bulk action compared a job
with every status the action may start from, so a skip reviewed as "failed" also skipped
jobs another operator had retried meanwhile (pending, which a skip allows); now each chunk
acts on a job only in the status the review showed (worker/store/sql/operations.sql,
tests/integration/test_bulk_after_review.py). A selection stored before this migration
has no statuses: its jobs are compared as before. Adding a nullable column rewrites
nothing.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0071"
down_revision = "0070"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(load_sql("jobwarden_drop_execution_partitions", revision))
    op.execute("ALTER TABLE console_selection_jobs ADD COLUMN statuses text[]")


def downgrade() -> None:
    op.execute("ALTER TABLE console_selection_jobs DROP COLUMN IF EXISTS statuses")
    op.execute(load_sql("jobwarden_drop_execution_partitions", "0066"))
