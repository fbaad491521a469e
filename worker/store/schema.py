"""The schema the code expects, as SQLAlchemy metadata.

Alembic migrations own the database; this module is the runtime's view of it. The
console adds its own table (`console_users`, in console/data/schema.py) to the same
`metadata`, and tests/integration/test_migrations.py checks that upgrading an empty
database yields exactly the union.
"""

import re

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

from jobwarden.worker.core.states import LIVE_STATUSES as _LIVE
from jobwarden.worker.core.states import TERMINAL_STATUSES as _TERMINAL
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus, WorkerState

# Plain-text tuples of the enums in worker/core/states.py, for CHECK constraints and callers
# that want strings (the console's forms and filters).
#: Every value `background_jobs.status` may take (docs/architecture.md §2).
JOB_STATUSES = tuple(s.value for s in JobStatus)
#: Statuses no worker will move a job out of by itself.
TERMINAL_STATUSES = tuple(s.value for s in _TERMINAL)
#: A job in one of these holds its idempotency key: enqueueing it again returns it.
LIVE_STATUSES = tuple(s.value for s in _LIVE)
#: Outcomes an execution (one claim) can end with.
EXECUTION_OUTCOMES = tuple(o.value for o in ExecutionOutcome)
WORKER_STATES = tuple(w.value for w in WorkerState)
#: What job_event_totals counts (worker/store/event_totals.py).
EVENTS = ("recovered", "zombie_outcome", "zombie_lease", "expired")


def check_in(column: str, values: tuple[str, ...]) -> str:
    """A CHECK expression: `column` takes one of `values`."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


metadata = MetaData()
TS = DateTime(timezone=True)

background_jobs = Table(
    "background_jobs",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("queue", Text, nullable=False, server_default="default"),
    Column("type", Text, nullable=False),
    Column("version", Integer, nullable=False, server_default="1"),
    Column("payload", JSONB, nullable=False),
    Column("status", Text, nullable=False, server_default="pending"),
    Column("priority", Integer, nullable=False, server_default="0"),
    Column("available_at", TS, nullable=False, server_default=text("now()")),
    Column("attempts", Integer, nullable=False, server_default="0"),
    # Executions that snoozed the job (migration 0021): bounded by a type's max_snoozes.
    Column("snoozes", Integer, nullable=False, server_default="0"),
    Column("max_attempts", Integer, nullable=False, server_default="5"),
    Column("worker_id", Text),
    Column("execution_id", UUID(as_uuid=True)),
    Column("started_at", TS),
    Column("heartbeat_at", TS),
    Column("lease_seconds", Float),
    Column("lease_expires_at", TS),
    Column("last_error_code", Text),
    Column("last_error", Text),
    Column("progress", JSONB),
    Column("checkpoint", JSONB),
    Column("idempotency_key", Text),
    Column("concurrency_key", Text),
    # Which of its key's slots the job took at its last claim; meaningful while it runs
    # (migration 0015).
    Column("concurrency_slot", SmallInteger, nullable=False, server_default="0"),
    Column("cancel_requested_at", TS),
    Column("manual_retry_count", Integer, nullable=False, server_default="0"),
    Column("retried_by", Text),
    Column("retried_at", TS),
    Column("created_at", TS, nullable=False, server_default=text("now()")),
    Column("completed_at", TS),
    Column("failed_at", TS),
    Column("cancelled_at", TS),
    Column("skipped_at", TS),
    # Policy fields that took the documented defaults because no policy for the type was
    # known at enqueue; a worker's claim applies its own, its duty the published one in
    # small batches (migration 0004, docs/architecture.md §5).
    Column("policy_defaults", ARRAY(Text)),
    # Flows (migration 0073, docs/guide/flows.md): a waiting job's edges not yet released,
    # a parent's edges (0: no dependents, the finish statement's release skips it), and
    # what the completing execution's handler returned.
    Column("waiting_on", Integer, nullable=False, server_default="0"),
    Column("dependents", Integer, nullable=False, server_default="0"),
    Column("result", JSONB),
    # Batches (migration 0074, docs/guide/flows.md#batches): the batch the job is a member
    # of (NULL: none, and the finish statement does nothing more for it), and what it was
    # last counted as there (its final status; NULL while it may still run).
    Column("batch_id", BigInteger),
    Column("batch_counted", Text),
    # What a reconciler last said of an unknown job it could not settle (migration 0077):
    # 'unknown' (it could not tell) or 'error' (it failed); NULL: none answered since the
    # job last ran (a retry clears it).
    Column("reconcile_verdict", Text),
    # Uniqueness and expiry (migration 0081, docs/guide/uniqueness.md): the deadline after
    # which the job is never started (NULL: none), and the unique key it was enqueued
    # under with unique_for or replace (job_unique_keys names the key's holder).
    Column("expires_at", TS),
    Column("unique_key", Text),
    # The W3C trace context it was enqueued in, as the propagator's JSON object (migration
    # 0084, worker/core/tracing.py); NULL: no trace was current, or no OpenTelemetry.
    Column("trace_context", Text),
    # Fair share (migration 0088, docs/guide/fair-share.md): the value of its type's
    # `fair_key` payload path ('' when the payload lacks it); NULL for a type without one.
    Column("fair_key", Text),
    CheckConstraint(check_in("status", JOB_STATUSES), name="background_jobs_status_check"),
    CheckConstraint("attempts >= 0", name="background_jobs_attempts_check"),
    CheckConstraint("max_attempts >= 1", name="background_jobs_max_attempts_check"),
    # The payload is a JSON object: checked by triggers where a payload is written, not
    # by a CHECK, which every update of the row evaluated (sql/schema/payload.sql).
    CheckConstraint(
        "status <> 'running' OR execution_id IS NOT NULL",
        name="background_jobs_running_owner_check",
    ),
    # Only a running job holds a lease: recovery and the console rely on it (migration 0020).
    CheckConstraint(
        "lease_expires_at IS NULL OR status = 'running'",
        name="background_jobs_lease_only_while_running_check",
    ),
)
# The claim path: pending jobs by aged priority, i.e. by available_at moved earlier by
# 10 seconds per priority level (the function, migration 0016), lowest rank first. It
# leads with the constant `status` so the planner costs it like the other status indexes
# whatever the statistics (migration 0016's docstring).
Index(
    "background_jobs_claim_rank_idx",
    background_jobs.c.status, text("jobwarden_claim_rank(available_at, priority)"),
    background_jobs.c.id,
    postgresql_where=text("status = 'pending'"),
)
# The fair claim's walk (claim_fair_jobs, migration 0088): pending jobs that have a fair
# key, by key, then in claim order; no row of a job without one.
Index(
    "background_jobs_fair_idx",
    background_jobs.c.fair_key, text("jobwarden_claim_rank(available_at, priority)"),
    background_jobs.c.id,
    postgresql_where=text("status = 'pending' AND fair_key IS NOT NULL"),
)
# Recovery scans only running jobs by lease expiry.
Index(
    "background_jobs_lease_idx",
    background_jobs.c.lease_expires_at,
    postgresql_where=text("status = 'running'"),
)
# Failed jobs grouped by error code (console) and ordered by time.
Index(
    "background_jobs_failed_idx",
    background_jobs.c.last_error_code, background_jobs.c.failed_at,
    postgresql_where=text("status = 'failed'"),
)
# The jobs list by status, newest first, for the statuses no job of the hot path passes
# through (migration 0062: a full index took an entry at each of a job's status changes).
Index(
    "background_jobs_settled_status_idx",
    background_jobs.c.status, background_jobs.c.id,
    postgresql_where=text("status IN ('failed', 'cancelled', 'skipped', 'unknown')"),
)
# Retention: finished jobs of a status by the time they reached it (the function,
# migration 0017), oldest first.
Index(
    "background_jobs_retention_idx",
    background_jobs.c.status,
    text("jobwarden_finished_at(status, completed_at, failed_at, cancelled_at, skipped_at, "
         "created_at)"),
    background_jobs.c.id,
    postgresql_where=text("status IN ('completed', 'failed', 'cancelled', 'skipped')"),
)
# A type's settled jobs, and its jobs that carry an error code (the retrying groups'
# pending and running ones): migration 0062.
Index(
    "background_jobs_type_status_idx",
    background_jobs.c.type, background_jobs.c.status,
    postgresql_where=text("status IN ('failed', 'cancelled', 'skipped', 'unknown') "
                          "OR last_error_code IS NOT NULL"),
)
# The waiting jobs (migration 0073): the repair duty's and the jobs list's.
Index(
    "background_jobs_waiting_idx",
    background_jobs.c.id,
    postgresql_where=text("status = 'waiting'"),
)
Index(
    "background_jobs_idempotency_live_idx",
    background_jobs.c.idempotency_key,
    unique=True,
    postgresql_where=text(
        "idempotency_key IS NOT NULL AND status IN ('pending', 'running')"
    ),
)
# Pending jobs that have a deadline (migration 0081): the expiry duty's walk. A job without
# one never enters it.
Index(
    "background_jobs_expiring_idx",
    background_jobs.c.expires_at,
    postgresql_where=text("status = 'pending' AND expires_at IS NOT NULL"),
)

# A batch's members (migration 0074), and those whose status and count differ (none but
# a member finished by a runtime from before batches): the repair duty's.
Index(
    "background_jobs_batch_idx",
    background_jobs.c.batch_id,
    postgresql_where=text("batch_id IS NOT NULL"),
)
Index(
    "background_jobs_batch_uncounted_idx",
    background_jobs.c.id,
    postgresql_where=text("batch_id IS NOT NULL AND batch_counted IS DISTINCT FROM "
                          "(CASE WHEN status IN ('pending', 'waiting', 'running') THEN NULL "
                          "ELSE status END)"),
)

# Unknown jobs by type, code and reconciler's verdict (migration 0077): Needs review's
# groups from the index alone, a group's jobs newest first. Unknown rows only.
Index(
    "background_jobs_unknown_idx",
    background_jobs.c.type, background_jobs.c.last_error_code,
    background_jobs.c.reconcile_verdict, background_jobs.c.id,
    postgresql_where=text("status = 'unknown'"),
)

# One row per edge of a flow: the dependent `job_id` waits for `parent_id` (migration
# 0073). Released once, when the parent completes (or reaches any final state, for a
# `run_anyway` edge), or by an operator's decision.
job_dependencies = Table(
    "job_dependencies",
    metadata,
    Column("job_id", BigInteger, ForeignKey("background_jobs.id", ondelete="CASCADE"),
           primary_key=True),
    Column("parent_id", BigInteger, ForeignKey("background_jobs.id", ondelete="CASCADE"),
           primary_key=True),
    Column("run_anyway", Boolean, nullable=False, server_default=text("false")),
    Column("released_at", TS),
    CheckConstraint("job_id <> parent_id", name="job_dependencies_not_self_check"),
)
Index("job_dependencies_parent_idx", job_dependencies.c.parent_id)

# A set of jobs with callbacks (migration 0074, docs/guide/flows.md#batches): its
# members counted by the final state each reached, under this row's lock, and the
# moments its callbacks came due, each written once.
job_batches = Table(
    "job_batches",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("description", Text, nullable=False),
    Column("owner", Text),
    Column("created_at", TS, nullable=False, server_default=text("now()")),
    *(Column(name, Integer, nullable=False, server_default="0") for name in (
        "members", "completed", "failed", "cancelled", "skipped", "unknown")),
    Column("closed_at", TS),
    Column("failure_at", TS),
    Column("complete_at", TS),
    Column("success_at", TS),
)
Index("job_batches_owner_idx", job_batches.c.owner, job_batches.c.id,
      postgresql_where=text("owner IS NOT NULL"))
# Retention: batches by the moment they ended (completed, else closed, else opened),
# oldest first (migration 0075).
Index("job_batches_ended_idx", text("coalesce(complete_at, closed_at, created_at)"),
      job_batches.c.id)

#: The moments a batch calls back (job_batch_callbacks.event).
BATCH_EVENTS = ("complete", "success", "failure")

# Each callback of a batch as its enqueue resolved it, and the job it became (no foreign
# key: retention may remove the job first).
job_batch_callbacks = Table(
    "job_batch_callbacks",
    metadata,
    Column("batch_id", BigInteger, ForeignKey("job_batches.id", ondelete="CASCADE"),
           primary_key=True),
    Column("event", Text, primary_key=True),
    Column("queue", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("priority", Integer, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("concurrency_key", Text),
    Column("policy_defaults", ARRAY(Text)),
    Column("job_id", BigInteger),
    CheckConstraint(check_in("event", BATCH_EVENTS), name="job_batch_callbacks_event_check"),
)

#: The partitions of job_executions (its weeks, and the default that holds the history
#: from before migration 0066): made and dropped by the runtime, not declared here.
HISTORY_PARTITION = re.compile(r"job_executions_(w[0-9]{8}|before)")


def declared(name: str | None, type_: str, parent_names: object = None) -> bool:
    """Alembic's `include_name`: every table but the history's partitions is compared."""
    return not (type_ == "table" and name is not None and HISTORY_PARTITION.fullmatch(name))


# Partitioned by week of finished_at (migration 0066): no primary key on the parent (a
# partitioned table's unique keys must hold the partition key; a deleted job's history
# goes with its week).
job_executions = Table(
    "job_executions",
    metadata,
    Column("id", BigInteger, Identity(always=False), nullable=False),
    # No foreign key (migration 0065): retention deletes a job's executions with it, from
    # the default partition; a week's go with the week (migration 0066).
    Column("job_id", BigInteger, nullable=False),
    # Not a key: a partitioned table's unique keys must hold the partition key (0066).
    Column("execution_id", UUID(as_uuid=True), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("queue", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("worker_id", Text, nullable=False),
    Column("scheduled_at", TS, nullable=False),
    Column("started_at", TS, nullable=False, server_default=text("now()")),
    Column("heartbeat_at", TS),
    Column("finished_at", TS),
    Column("outcome", Text),
    Column("error_code", Text),
    Column("error", Text),
    Column("duration_ms", Float),
    Column("traceback", Text),  # migration 0011
    CheckConstraint(
        "outcome IS NULL OR " + check_in("outcome", EXECUTION_OUTCOMES),
        name="job_executions_outcome_check",
    ),
    postgresql_partition_by="RANGE (finished_at)",
)
# Only the open rows an older runtime's claim left (migration 0093): the finish closes
# them by execution id. A finished execution is found by its job (job_idx): an index of
# random uuids costs every finish an entry on a random page of a large index.
Index("job_executions_open_idx", job_executions.c.execution_id,
      postgresql_where=text("finished_at IS NULL"))
Index("job_executions_job_idx", job_executions.c.job_id, job_executions.c.attempt)
# None on started_at (migration 0091): the reads of a window of starts bound finished_at too.
Index("job_executions_finished_idx", job_executions.c.finished_at)
# A type's handler durations by time (migration 0078; console/data/sql/durations.sql):
# the executions a handler ended, their durations beside the key for an index-only scan.
Index(
    "job_executions_type_duration_idx",
    job_executions.c.type, job_executions.c.finished_at,
    postgresql_include=["duration_ms"],
    postgresql_where=text("outcome IN ('completed', 'retry', 'failed', 'skipped', "
                          "'snoozed', 'timeout')"),
)

job_audit = Table(
    "job_audit",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("job_id", BigInteger, ForeignKey("background_jobs.id", ondelete="SET NULL")),
    Column("bulk_id", UUID(as_uuid=True)),
    Column("actor", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("from_status", Text),
    Column("to_status", Text),
    Column("at", TS, nullable=False, server_default=text("now()")),
    Column("request_id", Text),
    Column("details", JSONB),
)
Index("job_audit_job_idx", job_audit.c.job_id, job_audit.c.at)
Index("job_audit_at_idx", job_audit.c.at)
Index("job_audit_actor_idx", job_audit.c.actor, job_audit.c.at)
# An operator action looks for the audit row of an earlier submission of its form
# (operator_audit_by_request, migration 0012).
Index(
    "job_audit_request_idx",
    job_audit.c.request_id, job_audit.c.actor, job_audit.c.action,
    postgresql_where=text("request_id IS NOT NULL"),
)
# One line per operator action (migration 0078), kept by triggers on job_audit
# (sql/schema/audit_lines.sql): `id` its first audit row's, a bulk action's one line
# counting the jobs its chunks changed (`jobs`), `last_at` its latest chunk's moment.
job_audit_lines = Table(
    "job_audit_lines",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("bulk_id", UUID(as_uuid=True)),
    Column("at", TS, nullable=False),
    Column("last_at", TS, nullable=False),
    Column("actor", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("jobs", BigInteger, nullable=False),
)
Index("job_audit_lines_bulk_key", job_audit_lines.c.bulk_id, unique=True,
      postgresql_where=text("bulk_id IS NOT NULL"))
Index("job_audit_lines_actor_idx", job_audit_lines.c.actor, job_audit_lines.c.id)
Index("job_audit_lines_at_idx", job_audit_lines.c.at)

job_workers = Table(
    "job_workers",
    metadata,
    Column("worker_id", Text, primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("queues", ARRAY(Text), nullable=False),
    Column("job_types", ARRAY(Text), nullable=False),
    Column("concurrency", Integer, nullable=False),
    Column("version", Text, nullable=False),
    Column("started_at", TS, nullable=False, server_default=text("now()")),
    Column("heartbeat_at", TS, nullable=False, server_default=text("now()")),
    Column("stopped_at", TS),
    # One object per lane: {"queues": [...], "slots": N, "shared": bool} (worker/engine/lanes.py).
    Column("lanes", JSONB),
    Column("state", Text, nullable=False, server_default="running"),
    # Its lanes' event loops' worst lag over the last heartbeat (None: no loop).
    Column("loop_lag_ms", Float),
    CheckConstraint(check_in("state", WORKER_STATES), name="job_workers_state_check"),
)
# Workers by start (migration 0078): a type's duration chart marks its workers' starts.
Index("job_workers_started_idx", job_workers.c.started_at)

processed_effects = Table(
    "processed_effects",
    metadata,
    Column("key", Text, primary_key=True),
    Column("job_id", BigInteger),
    Column("execution_id", UUID(as_uuid=True)),
    Column("state", Text, nullable=False, server_default="reserved"),
    Column("result", JSONB),
    Column("created_at", TS, nullable=False, server_default=text("now()")),
    Column("done_at", TS),
    CheckConstraint("state IN ('reserved', 'done')", name="processed_effects_state_check"),
)

queue_controls = Table(
    "queue_controls",
    metadata,
    Column("queue", Text, primary_key=True),
    Column("paused", Boolean, nullable=False, server_default=text("false")),
    Column("changed_by", Text),
    Column("changed_at", TS, nullable=False, server_default=text("now()")),
)

# Token buckets of rate-limited scopes and the operators' live limits (migration 0050,
# docs/guide/rate-limits.md).
job_rate_buckets = Table(
    "job_rate_buckets",
    metadata,
    Column("bucket", Text, primary_key=True),
    Column("tokens", Float, nullable=False),
    Column("rate", Float, nullable=False),
    Column("burst", Float, nullable=False),
    Column("updated_at", TS, nullable=False),
    # The starts of the bucket's last window of burst / rate seconds (migration 0072).
    Column("window_starts", ARRAY(TS), nullable=False, server_default=text("'{}'")),
    Column("window_counts", ARRAY(Integer), nullable=False, server_default=text("'{}'")),
)

job_limit_controls = Table(
    "job_limit_controls",
    metadata,
    Column("scope", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("max_concurrency", Integer),
    Column("rate", Float),
    Column("burst", Float),
    Column("reason", Text, nullable=False),
    Column("set_by", Text, nullable=False),
    Column("set_role", Text, nullable=False),
    Column("set_at", TS, nullable=False, server_default=text("now()")),
    CheckConstraint("scope IN ('queue', 'type')", name="job_limit_controls_scope_check"),
    CheckConstraint("max_concurrency IS NULL OR max_concurrency >= 0",
                    name="job_limit_controls_concurrency_check"),
    CheckConstraint("rate IS NULL OR rate > 0", name="job_limit_controls_rate_check"),
    CheckConstraint("burst IS NULL OR burst >= 1", name="job_limit_controls_burst_check"),
    CheckConstraint("max_concurrency IS NOT NULL OR rate IS NOT NULL",
                    name="job_limit_controls_some_check"),
)

# Console indexes (migration 0002): failed groups by type without the heap, and the jobs
# list's idempotency-key search (the overview's counts come from the rollups).
Index(
    "background_jobs_failed_type_idx",
    background_jobs.c.last_error_code, background_jobs.c.type,
    postgresql_include=["failed_at"],
    postgresql_where=text("status = 'failed'"),
)
Index(
    "background_jobs_idempotency_key_idx",
    background_jobs.c.idempotency_key,
    postgresql_where=text("idempotency_key IS NOT NULL"),
)
# One type's failed groups and jobs, one code's newest failed jobs, from the index alone
# (migration 0040): failed rows only, so no transition of the hot path writes them.
Index(
    "background_jobs_failed_by_type_idx",
    background_jobs.c.type, background_jobs.c.last_error_code, background_jobs.c.failed_at,
    background_jobs.c.id,
    postgresql_where=text("status = 'failed'"),
)
Index(
    "background_jobs_failed_code_id_idx",
    background_jobs.c.last_error_code, background_jobs.c.id,
    postgresql_where=text("status = 'failed'"),
)

# Per-key limits (migrations 0003, 0015): running jobs of a key hold distinct slots.
Index(
    "background_jobs_concurrency_slot_idx",
    background_jobs.c.concurrency_key, background_jobs.c.concurrency_slot,
    unique=True,
    postgresql_where=text("status = 'running' AND concurrency_key IS NOT NULL"),
)
Index(
    "background_jobs_concurrency_key_idx",
    background_jobs.c.concurrency_key, background_jobs.c.status,
    postgresql_where=text("concurrency_key IS NOT NULL"),
)

# Published job-type policies (migration 0004): written by workers at start, read by
# enqueue for types it does not know and by the console for SLA targets.
job_types = Table(
    "job_types",
    metadata,
    Column("type", Text, primary_key=True),
    Column("queue", Text, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("timeout_seconds", Float),
    Column("lease_seconds", Float, nullable=False),
    Column("backoff", JSONB, nullable=False),
    Column("sla_seconds", Float),
    Column("version", Integer, nullable=False),
    Column("repeat_safe", Boolean, nullable=False),
    Column("concurrency_limit", Integer, nullable=False, server_default="1"),
    Column("published_by", Text, nullable=False),
    Column("published_at", TS, nullable=False, server_default=text("now()")),
    CheckConstraint("max_attempts >= 1", name="job_types_max_attempts_check"),
    CheckConstraint("version >= 1", name="job_types_version_check"),
    CheckConstraint("concurrency_limit >= 1", name="job_types_concurrency_limit_check"),
    # Declared rate limit (jobs per second), burst and key path (migration 0050).
    Column("rate_limit", Float),
    Column("rate_burst", Float),
    Column("rate_limit_key", Text),
    # Declared uniqueness window, debounce and expiry (migration 0081): what an enqueue
    # by a process without the handler applies (worker/jobs/uniqueness.py).
    Column("unique_for_seconds", Float),
    Column("replace", Boolean, nullable=False, server_default=text("false")),
    Column("expires_after_seconds", Float),
    # Declared fair key path and per-key weights (migration 0088).
    Column("fair_key", Text),
    Column("fair_weights", JSONB),
)
# Each version of a type's handler, first published when and by which worker (migration
# 0078, a trigger on job_types: sql/schema/type_versions.sql): the duration chart's marks.
job_type_versions = Table(
    "job_type_versions",
    metadata,
    Column("type", Text, primary_key=True),
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("first_at", TS, nullable=False, server_default=text("now()")),
    Column("first_by", Text, nullable=False),
)
Index(
    "background_jobs_policy_defaults_idx",
    background_jobs.c.type,
    postgresql_where=text("policy_defaults IS NOT NULL AND status = 'pending'"),
)

# Periodic jobs (migration 0008): one row per scheduled type; workers advance
# next_run_at by compare-and-set, so one job is enqueued per tick.
job_schedules = Table(
    "job_schedules",
    metadata,
    Column("type", Text, primary_key=True),
    Column("cron", Text, nullable=False),
    Column("timezone", Text, nullable=False, server_default="UTC"),
    Column("catch_up", Boolean, nullable=False, server_default=text("false")),
    Column("payload", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("paused", Boolean, nullable=False, server_default=text("false")),
    Column("next_run_at", TS, nullable=False),
    Column("last_run_at", TS),
    Column("last_job_id", BigInteger),
    Column("published_by", Text, nullable=False),
    Column("published_at", TS, nullable=False, server_default=text("now()")),
    # Console edits (migration 0082, worker/ops/schedule_edits.py): the code's declaration
    # kept beside an edit that wins over it; NULL when no code declares the schedule.
    Column("declared", JSONB),
    Column("edited_by", Text),
    Column("edited_at", TS),
    Column("revision", Integer, nullable=False, server_default=text("1")),
)
Index("job_schedules_due_idx", job_schedules.c.next_run_at,
      postgresql_where=text("NOT paused"))
# Rollups (migration 0009): kept by statement-level triggers on background_jobs, read by
# the console instead of counting jobs (docs/architecture.md §3, "Rollups").
job_count_deltas = Table(
    "job_count_deltas",
    metadata,
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("status", Text, nullable=False),
    Column("queue", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("jobs", BigInteger, nullable=False),
)
job_minute_counts = Table(
    "job_minute_counts",
    metadata,
    Column("minute", TS, primary_key=True),
    Column("queue", Text, primary_key=True),
    Column("type", Text, primary_key=True),
    Column("outcome", Text, primary_key=True),
    Column("error_code", Text, primary_key=True, server_default=text("''")),
    Column("jobs", BigInteger, nullable=False),
    # Which writer's rows (migration 0092, sql/schema/rollups.sql's jobwarden_rollup_shard):
    # up to 17 rows a key and minute, which every reader sums.
    Column("shard", SmallInteger, primary_key=True, server_default=text("0")),
)
Index(
    "job_minute_counts_error_idx",
    job_minute_counts.c.error_code, job_minute_counts.c.minute,
    postgresql_where=text("error_code <> ''"),
)
# Time to start and run time per 5 minutes an execution started in, type and queue, in log
# buckets of ratio 2^(1/8) (migration 0086, sql/schema/timings.sql): kept by a
# statement-level trigger on job_executions, read by the SLA page. `measure`: 'wait'
# (scheduled to started) or 'run' (duration_ms); `raised` counts the executions whose
# handler raised; `max_ms` is the bucket's largest time, exactly.
job_timings = Table(
    "job_timings",
    metadata,
    Column("period", TS, primary_key=True),
    Column("queue", Text, primary_key=True),
    Column("type", Text, primary_key=True),
    Column("measure", Text, primary_key=True),
    Column("bucket", Integer, primary_key=True),
    Column("executions", BigInteger, nullable=False),
    Column("raised", BigInteger, nullable=False),
    Column("max_ms", Float, nullable=False),
    # Which writer's rows, as job_minute_counts' (migration 0092).
    Column("shard", SmallInteger, primary_key=True, server_default=text("0")),
    CheckConstraint("measure IN ('wait', 'run')", name="job_timings_measure_check"),
)
# Totals of rare runtime events per type (migration 0013, worker/store/event_totals.py): they
# outlive retention, so /metrics exposes them as counters.
job_event_totals = Table(
    "job_event_totals",
    metadata,
    Column("event", Text, primary_key=True),
    Column("type", Text, primary_key=True),
    Column("total", BigInteger, nullable=False),
    Column("updated_at", TS, nullable=False, server_default=text("now()")),
    CheckConstraint(check_in("event", EVENTS), name="job_event_totals_event_check"),
)

# Unique keys (migration 0081, worker/jobs/uniqueness.py): the job that holds each, when it
# was enqueued and until when its window holds the key (NULL: no window). An enqueue of
# the key locks its row until the caller's transaction ends; the key goes with its job.
job_unique_keys = Table(
    "job_unique_keys",
    metadata,
    Column("key", Text, primary_key=True),
    Column("job_id", BigInteger, ForeignKey("background_jobs.id", ondelete="CASCADE")),
    Column("enqueued_at", TS, nullable=False, server_default=text("now()")),
    Column("held_until", TS),
)
Index("job_unique_keys_job_idx", job_unique_keys.c.job_id)
# One row per enqueue folded into an existing job (migration 0081): the job page's count.
job_folds = Table(
    "job_folds",
    metadata,
    Column("job_id", BigInteger, ForeignKey("background_jobs.id", ondelete="CASCADE"),
           nullable=False),
    Column("folded_at", TS, nullable=False, server_default=text("now()")),
    Column("replaced", Boolean, nullable=False),
)
Index("job_folds_job_idx", job_folds.c.job_id)

Index(
    "job_executions_lost_idx",
    job_executions.c.finished_at,
    postgresql_where=text("outcome = 'worker_lost'"),
)

# Notifications (migration 0079, docs/guide/notifications.md): the targets an admin set in
# the console, the notifier's open groups (its throttle), each message composed and one
# delivery per target it goes to, with the job that sends it.
job_notify_targets = Table(
    "job_notify_targets",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("kind", Text, nullable=False),
    Column("url", Text),
    Column("signing_secret", Text),
    Column("format", Text, nullable=False, server_default="json"),
    Column("smtp_host", Text),
    Column("smtp_port", Integer),
    Column("smtp_user", Text),
    Column("smtp_password", Text),
    Column("smtp_starttls", Boolean, nullable=False, server_default=text("true")),
    Column("email_from", Text),
    Column("email_to", ARRAY(Text)),
    # Compared and set by every edit and delete (two admins editing one target).
    Column("revision", Integer, nullable=False, server_default="1"),
    Column("created_at", TS, nullable=False, server_default=text("now()")),
    Column("created_by", Text, nullable=False),
    Column("updated_at", TS, nullable=False, server_default=text("now()")),
    Column("updated_by", Text, nullable=False),
    CheckConstraint("kind IN ('webhook', 'email')", name="job_notify_targets_kind_check"),
    CheckConstraint("format IN ('json', 'slack')", name="job_notify_targets_format_check"),
    CheckConstraint("kind <> 'webhook' OR url IS NOT NULL",
                    name="job_notify_targets_webhook_check"),
    CheckConstraint("kind <> 'email' OR (smtp_host IS NOT NULL AND smtp_port IS NOT NULL "
                    "AND email_from IS NOT NULL AND email_to IS NOT NULL)",
                    name="job_notify_targets_email_check"),
)
job_notify_groups = Table(
    "job_notify_groups",
    metadata,
    Column("kind", Text, primary_key=True),
    Column("job_type", Text, primary_key=True),
    Column("error_code", Text, primary_key=True, server_default=text("''")),
    Column("started_at", TS, nullable=False),
    Column("counted_from", TS, nullable=False),
    Column("last_seen_at", TS, nullable=False),
    Column("figure", BigInteger, nullable=False),
    Column("sent_figure", BigInteger, nullable=False),
    Column("last_sent_at", TS, nullable=False),
    Column("messages", Integer, nullable=False, server_default="1"),
)
job_notifications = Table(
    "job_notifications",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("kind", Text, nullable=False),
    Column("job_type", Text),
    Column("error_code", Text),
    Column("summary", Boolean, nullable=False, server_default=text("false")),
    Column("message", JSONB, nullable=False),
    Column("created_at", TS, nullable=False, server_default=text("now()")),
)
Index("job_notifications_created_idx", job_notifications.c.created_at)
job_notify_deliveries = Table(
    "job_notify_deliveries",
    metadata,
    Column("notification_id", BigInteger,
           ForeignKey("job_notifications.id", ondelete="CASCADE"), primary_key=True),
    Column("target", Text, primary_key=True),
    Column("job_id", BigInteger),
    Column("sent_at", TS),
)
Index("job_notify_deliveries_target_idx", job_notify_deliveries.c.target)

# Each attempt's log lines (migration 0087, docs/guide/logging.md): one row per execution
# that logged, written with its outcome; [time, level, logger, message] lines, redacted
# and capped by the worker, and how many lines past the cap were dropped.
job_execution_logs = Table(
    "job_execution_logs",
    metadata,
    Column("execution_id", UUID(as_uuid=True), primary_key=True),
    Column("job_id", BigInteger, nullable=False),
    Column("finished_at", TS, nullable=False),
    Column("lines", JSONB, nullable=False),
    Column("dropped", Integer, nullable=False, server_default="0"),
)
Index("job_execution_logs_finished_idx", job_execution_logs.c.finished_at)
