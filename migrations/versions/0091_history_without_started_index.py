"""The history keeps no index on started_at: one index entry less per execution.

Revision ID: 0091
Revises: 0090
Create Date: 2026-12-06

Every finish inserts an execution's history row, and each of the history's indexes adds
an entry to that insert: a measurable share of a no-op job's server CPU
(`bench/bench_cost.py --variant`). `job_executions_started_idx` served the console's
reads of "executions started in the last N minutes" (rate limits, queue waits, the
time-to-start metrics and the queue-flow alert). An execution's row is written when it
ends, with finished_at ≥ started_at (both the server's now(), the finish in a later
transaction than the claim), so those reads now bound finished_at by the same window and
walk `job_executions_finished_idx`; running executions have no finished_at and are read
from their job rows as before (job_executions_all).
"""

from alembic import op

revision = "0091"
down_revision = "0090"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS job_executions_started_idx")


def downgrade() -> None:
    op.execute("CREATE INDEX job_executions_started_idx ON job_executions (started_at)")
