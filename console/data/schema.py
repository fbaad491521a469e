"""The console's own tables, `console_users`, `console_login_throttle`, and
`console_selections` with its pages of jobs and chunks done, declared on the runtime's
schema metadata.

Only the console signs people in, so its users, roles and sign-in throttling live here,
not in worker/. The tables are created by the migrations like every other one (Alembic
owns the schema); declaring them on `jobwarden.worker.store.schema.metadata` lets the migration test
compare every table.
"""

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

from jobwarden.worker.ops.operations import SELECTION_FROM
from jobwarden.worker.store.schema import TS, background_jobs, check_in, job_audit, metadata

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

#: A selection's bulk action, from review to its end (migration 0030): `canary` acts on
#: the first `canary` jobs only and waits for the operator to continue or stop.
BULK_STATES = ("reviewed", "canary", "running", "stopped", "done")

console_selections = Table(
    "console_selections",
    metadata,
    Column("id", UUID, primary_key=True),
    Column("actor", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("created_at", TS, nullable=False, server_default=text("now()")),
    # When the action was started (the selection is used once).
    Column("used_at", TS),
    Column("jobs", Integer, nullable=False, server_default=text("0")),
    # Its jobs by status, type and failure age when selected: [{status, type, age, jobs}].
    Column("breakdown", JSONB),
    Column("state", Text, nullable=False, server_default=text("'reviewed'")),
    Column("reason", Text),
    Column("request_id", Text),
    Column("canary", Integer),
    # How many of its jobs, in page order, the chunks have dealt with so far.
    Column("next_ord", Integer, nullable=False, server_default=text("0")),
    Column("changed", Integer, nullable=False, server_default=text("0")),
    Column("left_alone", Integer, nullable=False, server_default=text("0")),
    Column("finished_at", TS),
    CheckConstraint(check_in("action", SELECTION_ACTIONS), name="console_selections_action_check"),
    CheckConstraint(check_in("state", BULK_STATES), name="console_selections_state_check"),
)
Index(
    "console_selections_unfinished_idx",
    console_selections.c.created_at,
    postgresql_where=text("state IN ('canary', 'running')"),
)

#: Ids per row of console_selection_jobs (the SQL of console/data/sql/bulk.sql uses it too).
SELECTION_PAGE = 1000

# The selected ids in pages of SELECTION_PAGE, in the order the action takes them.
console_selection_jobs = Table(
    "console_selection_jobs",
    metadata,
    Column("selection_id", UUID, ForeignKey("console_selections.id", ondelete="CASCADE"),
           primary_key=True),
    Column("page", Integer, primary_key=True),
    Column("job_ids", ARRAY(BigInteger), nullable=False),
    # Each job's status when selected, in job_ids' places (NULL: stored before 0071).
    Column("statuses", ARRAY(Text)),
)

# One row per chunk done: its jobs (ordinals first_ord <= n < last_ord of the selection),
# how many it changed, and the ids it left alone because they had moved on.
console_bulk_steps = Table(
    "console_bulk_steps",
    metadata,
    Column("selection_id", UUID, ForeignKey("console_selections.id", ondelete="CASCADE"),
           primary_key=True),
    Column("first_ord", Integer, primary_key=True),
    Column("last_ord", Integer, nullable=False),
    Column("at", TS, nullable=False, server_default=text("now()")),
    Column("changed", Integer, nullable=False),
    Column("left_alone", ARRAY(BigInteger), nullable=False),
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
