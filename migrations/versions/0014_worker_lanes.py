"""Each worker records its lanes: the queues it serves with the slots each group has.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-30

A worker started with `--queues email=4,reports=1,default` serves `email` and `reports`
with slots of their own and `default` with the shared `--concurrency` slots
(worker/engine/lanes.py). `job_workers.queues` keeps the plain list of queue names (metrics and
the queue list read it); `lanes` adds one object per lane, `{"queues": [...], "slots": N,
"shared": bool}`, for the console's Workers page. NULL for workers that registered
before this column existed: the console then shows one lane of `queues` and
`concurrency`.
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE job_workers ADD COLUMN lanes jsonb;")


def downgrade() -> None:
    op.execute("ALTER TABLE job_workers DROP COLUMN IF EXISTS lanes;")
