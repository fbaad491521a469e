"""Rebuilding the rollups counts what the trigger counts: outcomes as they were recorded.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01

`jobwarden_rollup_rebuild()` (migration 0009; demo data, repair after a restore) counted
each job once, by the status it is in now, and retries only from executions that ended
`retry`. The trigger (migration 0018) counts every move to an outcome as it happens. The
two disagreed: a recovered execution (`worker_lost`) was a retry live and nothing after a
rebuild; unknown outcomes, an execution's failure later retried by an operator, and the
operator's own moves (skip, cancel, resolve) were lost.

The rebuild now reads the three records of how work ended, each once:

* every finished execution but a hand-back, by its recorded outcome. `worker_lost` and
  `timeout` end either in a retry or for good; the status they moved the job to is the
  one the job's next record starts from: the first operator action after it (its
  `from_status`), else `pending` when another execution followed, else the job's status;
* every operator move to an outcome (`job_audit`, from one status to another);
* jobs in an outcome with neither record (rows written directly: imports, demo data),
  at the time they reached it.

What it cannot know it leaves out: the codes of executions whose jobs retention deleted
(their executions went with them), and an outcome an operator later changed without
an execution or audit row saying what it was.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(load_sql("jobwarden_rollup_rebuild", revision))


def downgrade() -> None:
    op.execute(load_sql("jobwarden_rollup_rebuild", "0009"))
