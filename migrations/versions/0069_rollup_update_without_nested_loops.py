"""The update trigger joins a statement's old and new rows by hash, whatever their number.

Revision ID: 0069
Revises: 0068
Create Date: 2026-12-04

`jobwarden_rollup_update` (migrations 0021 and 0068) joins the statement's transition
tables, `old_rows` and `new_rows`, on the job id. PL/pgSQL plans that statement once per
session, on its first firing, and the planner estimates a transition table by the rows
it holds then. A worker that starts idle claims one job at a time, so its claim and
outcome sessions plan the join for one row: a nested loop, which for a later batch of
200 compares 200 × 200 rows. Claims of 200 jobs on a session whose first claims took one
ran 14-20 ms against 8-13 ms on one whose first claim took 200, and a worker that had
run three jobs before a 50,000-job backlog arrived drained it at 5,561 jobs/s against
8,565 for one started on the backlog; with this setting 7,685-7,783 against 7,827
(bench/README.md, 2026-12-04).

With `enable_nestloop = off` on the function the planner joins the two by hash for one
row and for thousands alike; the outcome look-up's sub-select and the upserts plan as
before. Like `jit = off` (migration 0067) the setting belongs to the function: it holds
in every session that fires it, through a transaction pooler too, and a later
`CREATE OR REPLACE FUNCTION` of it drops it unless that says it again
(tests/integration/test_trigger_plans.py fails then).
"""

from alembic import op

revision = "0069"
down_revision = "0068"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER FUNCTION jobwarden_rollup_update() SET enable_nestloop = off")


def downgrade() -> None:
    op.execute("ALTER FUNCTION jobwarden_rollup_update() RESET enable_nestloop")
