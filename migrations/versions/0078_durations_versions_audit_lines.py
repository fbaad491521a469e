"""A job type's durations over time, its handler versions, and one audit line per action.

Revision ID: 0078
Revises: 0077
Create Date: 2026-12-11

Durations. A type's page charts the p50 and p95 of its handler's durations per 5 minutes
over 24 hours, or per hour over 7 days (console/data/durations.py). The history had no
index by type: the chart read every type's executions of the range through
`job_executions_finished_idx`. `job_executions_type_duration_idx` holds (type,
finished_at) with the duration beside it, for the executions a handler ended (completed,
retry, failed, skipped, snoozed, timeout): the chart is an index-only scan of one type's
rows in the range. The history is partitioned (migration 0066): each partition's index is
built CONCURRENTLY first (the history's writes go on), then, in one short transaction
holding the partitions' advisory lock (no week is made meanwhile), the parent's index is
created ON ONLY and each partition's attached; a week made since gets its index there
(an empty week: nothing to build). Weeks made later inherit it.

Versions. `job_types` keeps a type's current policy only, its `published_at` moved by
every worker start. `job_type_versions` records each (type, version) the first time a
worker publishes it, when and by which worker (a trigger on job_types: no runtime code
changed); the chart marks where a new version's first worker first ran the type. Versions
published before this migration are not known: none is recorded for them. The chart also
marks the type's workers' starts (deploy-like moments), read by a new index of
job_workers by start.

Audit lines. The compact audit view pages through actions: a bulk action is one line,
however many rows its chunks wrote. `job_audit_lines` holds one row per action, kept by a
statement-level trigger on job_audit (one row per audit row of no bulk action and per
stop; one per bulk action, its `jobs` counted up as its chunks write), filled here from
the existing log under a SHARE lock on job_audit (operator actions wait for it; no
worker writes job_audit).
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0078"
down_revision = "0077"
branch_labels = None
depends_on = None

INDEX = "job_executions_type_duration_idx"
#: Outcomes whose duration is the handler's: it returned or raised (or its timeout ended
#: it). Not a lost worker's (until its last heartbeat), a hand-back, a cancel or an
#: unknown end. console/data/sql/durations.sql repeats the list: the index's predicate.
HANDLER_ENDED = "('completed', 'retry', 'failed', 'skipped', 'snoozed', 'timeout')"
COLUMNS = f"(type, finished_at) INCLUDE (duration_ms) WHERE outcome IN {HANDLER_ENDED}"

FUNCTIONS = ("jobwarden_type_version_seen", "jobwarden_audit_lines",
             "jobwarden_audit_lines_truncate", "jobwarden_audit_lines_rebuild")


def _partitions(conn) -> list[str]:
    return [r[0] for r in conn.exec_driver_sql(
        "SELECT name FROM jobwarden_execution_partitions() ORDER BY name")]


def _valid_index(conn, name: str) -> bool | None:
    """True: a valid index of that name; False: an invalid one (a build that failed
    half-way); None: none."""
    return conn.exec_driver_sql(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname = %(name)s AND c.relnamespace = 'public'::regnamespace",
        {"name": name}).scalar()


def upgrade() -> None:
    conn = op.get_bind()
    with op.get_context().autocommit_block():
        for part in _partitions(conn):
            name = f"{part}_type_duration"
            if _valid_index(conn, name) is False:
                op.execute(f"DROP INDEX CONCURRENTLY {name}")
            if not _valid_index(conn, name):
                op.execute(f"CREATE INDEX CONCURRENTLY {name} ON {part} {COLUMNS}")
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute("SELECT pg_advisory_xact_lock(hashtext('jobwarden.partitions'))")
    op.execute(f"CREATE INDEX {INDEX} ON ONLY job_executions {COLUMNS}")
    for part in _partitions(conn):
        name = f"{part}_type_duration"
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {part} {COLUMNS}")
        op.execute(f"ALTER INDEX {INDEX} ATTACH PARTITION {name}")

    op.execute("""
        CREATE TABLE job_type_versions (
            type     text NOT NULL,
            version  integer NOT NULL,
            first_at timestamptz NOT NULL DEFAULT now(),
            first_by text NOT NULL,
            PRIMARY KEY (type, version)
        );
        CREATE TABLE job_audit_lines (
            id      bigint PRIMARY KEY,
            bulk_id uuid,
            at      timestamptz NOT NULL,
            last_at timestamptz NOT NULL,
            actor   text NOT NULL,
            role    text NOT NULL,
            action  text NOT NULL,
            reason  text NOT NULL,
            jobs    bigint NOT NULL
        );
        CREATE UNIQUE INDEX job_audit_lines_bulk_key ON job_audit_lines (bulk_id)
            WHERE bulk_id IS NOT NULL;
        CREATE INDEX job_audit_lines_actor_idx ON job_audit_lines (actor, id);
        CREATE INDEX job_audit_lines_at_idx ON job_audit_lines (at);
        -- The chart's worker starts, by time: job_workers keeps a row per process ever
        -- started.
        CREATE INDEX job_workers_started_idx ON job_workers (started_at);
    """)
    for function in FUNCTIONS:
        op.execute(load_sql(function, revision))
    op.execute(load_sql("type_version_trigger", revision))
    # The lines of the log so far, then the trigger, under the rebuild's lock: no
    # operator action falls between them.
    op.execute("SELECT jobwarden_audit_lines_rebuild()")
    op.execute(load_sql("audit_lines_triggers", revision))


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS job_audit_lines_insert ON job_audit")
    op.execute("DROP TRIGGER IF EXISTS job_audit_lines_truncate ON job_audit")
    op.execute("DROP TRIGGER IF EXISTS job_types_version_seen ON job_types")
    for function in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {function}()")
    op.execute("DROP TABLE IF EXISTS job_audit_lines")
    op.execute("DROP TABLE IF EXISTS job_type_versions")
    # The partitions' indexes are attached to it: they go with it.
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
