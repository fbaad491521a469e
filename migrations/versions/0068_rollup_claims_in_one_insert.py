"""The update trigger counts a claim (or a renewal) with one insert.

Revision ID: 0068
Revises: 0067
Create Date: 2026-12-03

Every claim fires `jobwarden_rollup_update` (migration 0021's text, 0067's `SET jit =
off`), and its one statement does everything any UPDATE of `background_jobs` may need:
the moves by (status, queue, type), the outcome lookup on `job_executions` for a row that
went back to pending, and the minute rollup's upsert. A claim needs only the first: every
row it leaves is `running`, so no execution ended in it, and the outcome part's WHERE
keeps nothing (it counts only rows that reached a settled status or went back to
pending). The same holds for a heartbeat's or progress save's renewal, which moves
nothing at all.

So when no new row is anything but `running`, the function writes the count deltas
alone, in a statement of its own with none of the rest to set up. After an idle spell
that took 0.13 ms off a one-job claim's round trip (from 1.90 to 1.77 ms at the median,
200 claims alternating with the old function; bench/README.md, "Enqueue→start tail").
Every other statement runs migration 0021's statement unchanged, and both paths fold
the deltas as before (tests/integration/test_rollups.py checks the counts after claims,
renewals, completions, retries, hand-backs and moves by hand).
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0068"
down_revision = "0067"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(load_sql("jobwarden_rollup_update", revision))


def downgrade() -> None:
    # The function as migration 0021 wrote it, with 0067's setting.
    op.execute(load_sql("jobwarden_rollup_update", "0021"))
    op.execute("ALTER FUNCTION jobwarden_rollup_update() SET jit = off")
