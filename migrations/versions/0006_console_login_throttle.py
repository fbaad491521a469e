"""Sign-in throttling: failed attempts per account and per client address.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

Kept in PostgreSQL, not in process memory, so every console process (gunicorn workers,
restarts) sees the same counts.
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE console_login_throttle (
            subject          text PRIMARY KEY,
            failures         integer NOT NULL,
            last_failure_at  timestamptz NOT NULL,
            locked_until     timestamptz
        );
    """)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS console_login_throttle")
