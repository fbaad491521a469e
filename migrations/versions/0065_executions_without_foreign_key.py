"""job_executions keeps no foreign key to background_jobs: retention deletes both.

Revision ID: 0065
Revises: 0064
Create Date: 2026-12-01

The foreign key checked every history row as it was inserted with a `FOR KEY SHARE`
lock on its job's row, which writes a heap lock record to the WAL: one per execution,
on the job row the same statement had just updated (about 56 bytes of the 1,700 or so a
job writes). The key's only other work was `ON DELETE CASCADE`, and the one statement
that deletes jobs, `retention_delete_batch`, now deletes their executions itself in the
same statement (by `job_executions_job_idx`). Every history row is written by
`finish_executions` for a job it has just moved, so no row can name a job that does
not exist. Without the key the history can also be partitioned by time later (issue
21), which a cascade from `background_jobs` would stand in the way of.

Dropping a foreign key takes a SHARE ROW EXCLUSIVE lock on both tables for a moment.
"""

from alembic import op

revision = "0065"
down_revision = "0064"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE job_executions DROP CONSTRAINT job_executions_job_id_fkey")


def downgrade() -> None:
    # NOT VALID, then validated: rows already there are checked without blocking writes.
    op.execute("""
        DELETE FROM job_executions e
        WHERE NOT EXISTS (SELECT 1 FROM background_jobs j WHERE j.id = e.job_id);
        ALTER TABLE job_executions ADD CONSTRAINT job_executions_job_id_fkey
            FOREIGN KEY (job_id) REFERENCES background_jobs (id) ON DELETE CASCADE
            NOT VALID;
        ALTER TABLE job_executions VALIDATE CONSTRAINT job_executions_job_id_fkey;
    """)
