"""The console's own tables, `console_users` and `console_login_throttle`, declared on
the runtime's schema metadata.

Only the console signs people in, so its users, roles and sign-in throttling live here,
not in worker/. The tables are created by the migrations like every other one (Alembic
owns the schema); declaring them on `worker.schema.metadata` lets the migration test
compare every table.
"""

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Identity,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from worker.schema import TS, check_in, metadata

#: Console roles, least to most powerful: viewers read, operators act, admins manage users.
ROLES = ("viewer", "operator", "admin")

console_users = Table(
    "console_users",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("username", Text, nullable=False),
    Column("password_hash", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("disabled", Boolean, nullable=False, server_default=text("false")),
    Column("created_at", TS, nullable=False, server_default=text("now()")),
    Column("last_login_at", TS),
    # Bumped to end every session of the user (sign-out, password, role, disable).
    Column("session_generation", Integer, nullable=False, server_default=text("0")),
    UniqueConstraint("username", name="console_users_username_key"),
    CheckConstraint(check_in("role", ROLES), name="console_users_role_check"),
)

# Failed sign-ins per "account:<name>" and "address:<ip>" (console/login_throttle.py).
console_login_throttle = Table(
    "console_login_throttle",
    metadata,
    Column("subject", Text, primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("last_failure_at", TS, nullable=False),
    Column("locked_until", TS),
)
