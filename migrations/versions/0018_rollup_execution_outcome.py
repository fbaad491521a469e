"""A hand-back at shutdown is not a retry: rollups read how the execution ended.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01

The rollup trigger of migration 0009 counted every `running -> pending` move as a retry.
A graceful shutdown hands its unfinished jobs back that way too (no attempt spent), so
every deploy inflated the retry rate, the trend chart's retries and the failed groups'
streaks. The trigger now reads the outcome the same statement recorded for the execution
that left `running` (`job_executions.outcome`, one index lookup per such row; completions
and failures, the common case, pay nothing): `handed_back` is no outcome at all; `retry`
and `worker_lost` are retries. A row moved by hand with no execution row is still counted
by its status change, as before.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(load_sql("jobwarden_rollup_update", revision))


def downgrade() -> None:
    op.execute(load_sql("jobwarden_rollup_update", "0009"))
