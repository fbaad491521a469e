"""Only a running job holds a lease: the schema says so.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01

Recovery takes a job whose lease ran out (`status = 'running' AND lease_expires_at <
now()`), and the console reads `lease_expires_at` as "a worker holds this job until".
Every statement that moves a job out of `running` (finish_executions, recover_executions,
hand_back_executions) clears the lease, and the other transitions start from statuses that
never hold one; a row written by hand could still carry one. The CHECK makes the invariant
the schema's, so a statement that forgets it fails at once instead of leaving a lease that
means nothing.

The constraint is added NOT VALID (a brief lock, no scan) and then validated outside the
migration's transaction: VALIDATE scans the table under SHARE UPDATE EXCLUSIVE, so workers
keep claiming and finishing jobs meanwhile; inside one transaction the ADD's ACCESS
EXCLUSIVE lock would be held through the whole scan. Leases left on rows that are not
running (by hand, or by a script) are cleared first: they mean nothing, and the
validation would otherwise refuse the upgrade.
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

CONSTRAINT = "background_jobs_lease_only_while_running_check"


def upgrade() -> None:
    op.execute("UPDATE background_jobs SET lease_expires_at = NULL "
               "WHERE status <> 'running' AND lease_expires_at IS NOT NULL")
    # Enforced for every write from here on; the rows already there are checked below.
    op.execute(f"ALTER TABLE background_jobs DROP CONSTRAINT IF EXISTS {CONSTRAINT}")
    op.execute(f"ALTER TABLE background_jobs ADD CONSTRAINT {CONSTRAINT} "
               "CHECK (lease_expires_at IS NULL OR status = 'running') NOT VALID")
    with op.get_context().autocommit_block():
        op.execute(f"ALTER TABLE background_jobs VALIDATE CONSTRAINT {CONSTRAINT}")


def downgrade() -> None:
    op.execute(f"ALTER TABLE background_jobs DROP CONSTRAINT IF EXISTS {CONSTRAINT}")
