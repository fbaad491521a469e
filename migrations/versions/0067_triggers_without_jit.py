"""The row-count triggers never compile their statements with JIT.

Revision ID: 0067
Revises: 0066
Create Date: 2026-12-03

Every claim, outcome batch and enqueue fires a statement-level trigger of migration 0009
(`jobwarden_rollup_update`, `jobwarden_rollup_rows`; with `jobwarden_rollup_fold` below
them) or 0001 (`jobwarden_notify_jobs`). PL/pgSQL plans their statements once per
session, with whatever statistics there are, and the update trigger's statement holds
a sub-select on `job_executions` (how an execution that went back to pending ended).
Without statistics (autovacuum off, or before its first ANALYZE) the planner guesses 0.5%
of a partition's rows per execution id, so the plan's cost grows with the history: past
about 300,000 executions it passed `jit_above_cost`, and then each firing compiled the
statement's expressions with LLVM, 25-27 ms a statement (auto_explain: "Emission 23.8 ms")
for work of a fraction of a millisecond. On 2,000,000 unanalyzed executions one worker
process drained 2,585-3,166 jobs/s with it and 15,041-19,002 without (bench/README.md,
"Triggers and JIT"). The sub-select runs only for the rows that went back to pending, and
these statements touch a few rows each: compiling them never pays.

`SET jit = off` on the functions holds in every session that fires them (workers, the
console's actions, an application's enqueue) and through a transaction pooler, where a
session setting would not. A `CREATE OR REPLACE FUNCTION` of any of them drops the
setting: a later migration that redefines one must say `SET jit = off` again
(tests/integration/test_trigger_jit.py fails otherwise).
"""

from alembic import op

revision = "0067"
down_revision = "0066"
branch_labels = None
depends_on = None

#: The functions the hot path's triggers run.
FUNCTIONS = ("jobwarden_rollup_update()", "jobwarden_rollup_rows()", "jobwarden_rollup_fold()",
             "jobwarden_notify_jobs()")


def upgrade() -> None:
    for function in FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function} SET jit = off")


def downgrade() -> None:
    for function in FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function} RESET jit")
