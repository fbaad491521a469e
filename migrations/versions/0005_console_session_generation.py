"""Console sessions that can be revoked: a per-user session generation.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

A session cookie records the generation it was issued under; signing out, a password
reset, a role change and disabling the account increment it, so every cookie issued
before (copies included) stops working on its next request.

Sign-in now normalises the name it is given (NFKC, case-folded: console/core/account_policy.py),
so names stored earlier with capitals are stored lower-cased here, or their users could no
longer sign in. A name whose lower-cased form another user already holds is left as it is
(an admin renames one of the two); the warning below names none of them.
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE console_users "
               "ADD COLUMN session_generation integer NOT NULL DEFAULT 0")
    op.execute("""
        UPDATE console_users u SET username = lower(u.username)
        WHERE u.username <> lower(u.username)
          AND NOT EXISTS (SELECT 1 FROM console_users o
                          WHERE o.username <> u.username
                            AND lower(o.username) = lower(u.username))
    """)


def downgrade() -> None:
    op.execute("ALTER TABLE console_users DROP COLUMN IF EXISTS session_generation")
