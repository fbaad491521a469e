"""job_executions is keyed by its execution id: one unique index where there were two.

Revision ID: 0064
Revises: 0063
Create Date: 2026-12-01

Every execution's history row took an entry in the primary key on `id` and one in the
unique index on `execution_id`, and nothing looks a row up by `id` (it only breaks ties
between a job's attempts). `execution_id` is unique and never NULL already, so it
becomes the primary key and `id` stays an ordinary identity column: one index entry
less per execution.

The new key's index is built CONCURRENTLY first; the swap itself only drops two
constraints and adopts that index (`ADD PRIMARY KEY USING INDEX`, no scan: the column
is NOT NULL), so its ACCESS EXCLUSIVE lock is held for a moment, not for a build.
"""

from alembic import op

revision = "0064"
down_revision = "0063"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        # A build that failed half-way leaves an invalid index of this name behind.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS job_executions_execution_key")
        op.execute("CREATE UNIQUE INDEX CONCURRENTLY job_executions_execution_key "
                   "ON job_executions (execution_id)")
    op.execute("""
        ALTER TABLE job_executions
            DROP CONSTRAINT job_executions_pkey,
            DROP CONSTRAINT job_executions_execution_id_key,
            ADD CONSTRAINT job_executions_pkey PRIMARY KEY
                USING INDEX job_executions_execution_key
    """)


def downgrade() -> None:
    op.execute("""
        ALTER TABLE job_executions
            DROP CONSTRAINT job_executions_pkey,
            ADD CONSTRAINT job_executions_pkey PRIMARY KEY (id),
            ADD CONSTRAINT job_executions_execution_id_key UNIQUE (execution_id)
    """)
