"""The console's own tables, `console_users`, `console_login_throttle` and
`console_selections`, declared on the runtime's schema metadata.

Only the console signs people in, so its users, roles and sign-in throttling live here,
not in worker/. The tables are created by the migrations like every other one (Alembic
owns the schema); declaring them on `worker.store.schema.metadata` lets the migration test
compare every table.
"""

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID

from worker.ops.operations import SELECTION_FROM
from worker.store.schema import TS, background_jobs, check_in, job_audit, metadata

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

# Failed sign-ins per "account:<name>" and "address:<ip>" (console/web/login_throttle.py).
console_login_throttle = Table(
    "console_login_throttle",
    metadata,
    Column("subject", Text, primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("last_failure_at", TS, nullable=False),
    Column("locked_until", TS),
)

#: Bulk actions a selection of jobs may take (migration 0010's check): the runtime's.
SELECTION_ACTIONS = tuple(SELECTION_FROM)

console_selections = Table(
    "console_selections",
    metadata,
    Column("id", UUID, primary_key=True),
    Column("actor", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("job_ids", ARRAY(BigInteger), nullable=False),
    Column("description", Text, nullable=False),
    Column("created_at", TS, nullable=False, server_default=text("now()")),
    Column("used_at", TS),
    CheckConstraint(check_in("action", SELECTION_ACTIONS), name="console_selections_action_check"),
)
Index(
    "job_audit_bulk_idx",
    job_audit.c.bulk_id,
    postgresql_where=text("bulk_id IS NOT NULL"),
)
Index(
    "background_jobs_error_code_idx",
    background_jobs.c.last_error_code, background_jobs.c.id,
    postgresql_where=text("last_error_code IS NOT NULL"),
)
