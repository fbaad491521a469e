"""Workers report their event loops' lag: a blocking call in a coroutine handler shows.

Revision ID: 0060
Revises: 0050
Create Date: 2026-12-01

A worker running `async def` handlers runs them on one event loop per lane
(worker/engine/loops.py). A handler that blocks (a synchronous call inside a coroutine)
stalls every coroutine of its lane. The heartbeat measures each loop's worst lag since
the last beat and writes it here (milliseconds; NULL for a worker with no loop), so the
Workers page can say that a loop is stalled while it is.
"""

from alembic import op

revision = "0060"
down_revision = "0050"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE job_workers ADD COLUMN loop_lag_ms double precision")


def downgrade() -> None:
    op.execute("ALTER TABLE job_workers DROP COLUMN loop_lag_ms")
