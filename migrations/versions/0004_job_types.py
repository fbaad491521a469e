"""Job types publish their policy: the handler's declaration is authoritative everywhere.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

A worker writes each job type it handles (queue, attempts, timeout, lease, backoff,
SLA, version, repeat safety) to `job_types` when it starts. `enqueue` in a process that
never imported the handler reads its defaults from there, and the console its SLA
targets. A job enqueued while no policy was known records which fields took the
documented defaults (`policy_defaults`); the next worker of its type applies its own.
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE job_types (
            type            text PRIMARY KEY,
            queue           text NOT NULL,
            max_attempts    integer NOT NULL,
            timeout_seconds double precision,
            lease_seconds   double precision NOT NULL,
            backoff         jsonb NOT NULL,
            sla_seconds     double precision,
            version         integer NOT NULL,
            repeat_safe     boolean NOT NULL,
            published_by    text NOT NULL,
            published_at    timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT job_types_max_attempts_check CHECK (max_attempts >= 1),
            CONSTRAINT job_types_version_check CHECK (version >= 1)
        );
        ALTER TABLE background_jobs ADD COLUMN policy_defaults text[];
        CREATE INDEX background_jobs_policy_defaults_idx
            ON background_jobs (type)
            WHERE policy_defaults IS NOT NULL AND status = 'pending';
    """)


def downgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS background_jobs_policy_defaults_idx;
        ALTER TABLE background_jobs DROP COLUMN IF EXISTS policy_defaults;
        DROP TABLE IF EXISTS job_types;
    """)
