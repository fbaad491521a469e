"""Rate limits and live limits: token buckets, the operators' limit controls.

Revision ID: 0050
Revises: 0040
Create Date: 2026-12-01

- `job_rate_buckets`: one token bucket per rate-limited scope (`type:<t>`,
  `type:<t>#<key>` for a type limited per `rate_limit_key`, `queue:<q>`). A bucket is
  refilled lazily: its tokens are `least(burst, tokens + rate × seconds since
  updated_at)`, read by `jobwarden_tokens()`; a claim spends one token per job it
  claims, in its own statement, under a transaction-level advisory lock per scope
  (docs/guide/rate-limits.md). No row: a full bucket. The rate and burst last spent with
  are kept so the workers' duty can delete buckets that are full again.
- `job_limit_controls`: live limits an operator set on a queue or a type (maximum
  concurrency, rate per second, burst), with who set them, when and why; a cleared
  limit is a deleted row, and the declared value holds again.
- `job_types` publishes a type's declared rate limit (per second), burst and key path,
  so the console shows it without importing the application.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0050"
down_revision = "0040"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE job_rate_buckets (
            bucket     text PRIMARY KEY,
            tokens     float8      NOT NULL,
            rate       float8      NOT NULL,
            burst      float8      NOT NULL,
            updated_at timestamptz NOT NULL
        );
        CREATE TABLE job_limit_controls (
            scope           text        NOT NULL,
            name            text        NOT NULL,
            max_concurrency integer,
            rate            float8,
            burst           float8,
            reason          text        NOT NULL,
            set_by          text        NOT NULL,
            set_role        text        NOT NULL,
            set_at          timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (scope, name),
            CONSTRAINT job_limit_controls_scope_check CHECK (scope IN ('queue', 'type')),
            CONSTRAINT job_limit_controls_concurrency_check
                CHECK (max_concurrency IS NULL OR max_concurrency >= 0),
            CONSTRAINT job_limit_controls_rate_check CHECK (rate IS NULL OR rate > 0),
            CONSTRAINT job_limit_controls_burst_check CHECK (burst IS NULL OR burst >= 1),
            CONSTRAINT job_limit_controls_some_check
                CHECK (max_concurrency IS NOT NULL OR rate IS NOT NULL)
        );
        ALTER TABLE job_types ADD COLUMN rate_limit float8,
            ADD COLUMN rate_burst float8, ADD COLUMN rate_limit_key text;
    """)
    op.execute(load_sql("jobwarden_tokens", revision))
    op.execute(load_sql("jobwarden_rate_bucket", revision))


def downgrade() -> None:
    op.execute("""
        DROP FUNCTION jobwarden_rate_bucket(text, text, jsonb);
        DROP FUNCTION jobwarden_tokens(text, float8, float8, timestamptz);
        ALTER TABLE job_types DROP COLUMN rate_limit_key, DROP COLUMN rate_burst,
            DROP COLUMN rate_limit;
        DROP TABLE job_limit_controls;
        DROP TABLE job_rate_buckets;
    """)
