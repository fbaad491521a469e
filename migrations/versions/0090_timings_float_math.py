"""The timings rollup's per-row arithmetic in floats: half its cost on the finish path.

Revision ID: 0090
Revises: 0088
Create Date: 2026-12-06

The trigger of migration 0086 computed each execution's 5-minute period from a
timestamptz's epoch and its wait from an interval's epoch with `extract`, which returns
numeric: a division, a floor and a cast in arbitrary precision for every row a finish
writes. `date_bin` (immutable over timestamptz with a fixed interval, so still inlined)
and `date_part('epoch', interval)` (float8) give the same period and, to the last bit
but for a wait of over a day, the same milliseconds. Measured on 12,800 executions
grouped as the trigger groups them (the shared 2-core server, warm): 48 ms against
25 ms, the same as with neither function; about 2 µs per execution of the 4.4 µs the
trigger adds to a no-op job's server CPU (`bench/bench_cost.py --variant`, the trigger
disabled). The rebuild computes as the trigger does.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0090"
down_revision = "0088"
branch_labels = None
depends_on = None

FUNCTIONS = ("jobwarden_timing_period", "jobwarden_timings_record", "jobwarden_timings_rebuild")


def upgrade() -> None:
    for function in FUNCTIONS:
        op.execute(load_sql(function, revision))


def downgrade() -> None:
    for function in FUNCTIONS:
        op.execute(load_sql(function, "0086"))
