"""Console sessions that can be revoked: a per-user session generation.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

A session cookie records the generation it was issued under; signing out, a password
reset, a role change and disabling the account increment it, so every cookie issued
before (copies included) stops working on its next request.
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE console_users "
               "ADD COLUMN session_generation integer NOT NULL DEFAULT 0")


def downgrade() -> None:
    op.execute("ALTER TABLE console_users DROP COLUMN IF EXISTS session_generation")
