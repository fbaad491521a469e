"""Per-key limits: up to a job type's `concurrency_limit` running jobs per concurrency_key.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-30

A claimed job of a key takes a numbered slot, the smallest one free below its type's
limit (`claim_jobs`), and the unique index on (concurrency_key, concurrency_slot) among
running jobs replaces the one on the key alone as the last line of defence: two workers
claiming the last free slot of a key at the same instant cannot both commit. Existing
rows get slot 0, which the jobs running during the upgrade hold alone (the old index
allowed one running job per key). A worker of the previous release does not set the
slot; its own claim still starts a job only when no job of the key runs. Types publish
their limit in `job_types` (default 1: one running job per key, as before).
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        ALTER TABLE background_jobs ADD COLUMN concurrency_slot smallint NOT NULL DEFAULT 0;
        ALTER TABLE job_types ADD COLUMN concurrency_limit integer NOT NULL DEFAULT 1,
            ADD CONSTRAINT job_types_concurrency_limit_check CHECK (concurrency_limit >= 1);
        CREATE UNIQUE INDEX background_jobs_concurrency_slot_idx
            ON background_jobs (concurrency_key, concurrency_slot)
            WHERE status = 'running' AND concurrency_key IS NOT NULL;
        DROP INDEX background_jobs_concurrency_running_idx;
    """)


def downgrade() -> None:
    # Fails (unique violation) while a key has more than one running job: drain first.
    op.execute("""
        CREATE UNIQUE INDEX background_jobs_concurrency_running_idx
            ON background_jobs (concurrency_key)
            WHERE status = 'running' AND concurrency_key IS NOT NULL;
        DROP INDEX background_jobs_concurrency_slot_idx;
        ALTER TABLE job_types DROP COLUMN concurrency_limit;
        ALTER TABLE background_jobs DROP COLUMN concurrency_slot;
    """)
