"""Execution history partitioned by week, retired by dropping partitions.

Revision ID: 0066
Revises: 0065
Create Date: 2026-12-01

`job_executions` grows by one row per execution, for ever, and retention took it away
row by row (with each deleted job: a dead tuple, index entries and WAL per execution,
then vacuum's work). At a hundred million executions that DELETE is most
of the database's maintenance. Since migration 0061 a history row is written once, when
its execution ends, with `finished_at` set, so the table partitions by `finished_at`
(native range partitioning, one partition per UTC week) with no row ever moving, and
retention drops whole partitions (`jobwarden_drop_execution_partitions`): no dead tuple,
no WAL per row.

Existing history is not copied. The table becomes the new parent's DEFAULT partition
(`job_executions_before`), which holds every row finished before the cutover and the
rows still open (executions claimed by a runtime older than 0061); retention deletes its
rows with their jobs, as before, and never drops it. Without a long lock:

1. (table not empty) A CHECK `finished_at IS NULL OR finished_at < cutover`, the cutover
   the start of next week (a day away at least, so no write before it can violate it),
   added NOT VALID and validated while writes go on (SHARE UPDATE EXCLUSIVE), and the
   plain index on execution_id the parent needs built CONCURRENTLY. This is the only
   step whose time grows with the table (measured in bench/bench_partitions.py).
2. One short transaction under ACCESS EXCLUSIVE: rename, create the parent with the
   table's columns and its non-unique indexes (which the old table's match, so attaching
   it builds nothing), attach it as DEFAULT (nothing to check: no other partition yet),
   create the weeks from the cutover (the CHECK proves the default holds none of their
   rows, so no scan), recreate the views over the table.

A partitioned table cannot keep the primary key on execution_id (migration 0064) without
the partition key: the execution id's uniqueness rests on finish_executions' compare-and-
set (one execution owns a running job; its history row is written by the statement that
ends it), looked up through a plain index; ids stay unique from the identity sequence,
carried over. As since migration 0065 there is no foreign key to background_jobs: a
deleted job's history in weeks stays until its week is dropped.
"""

from datetime import UTC

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0066"
down_revision = "0065"
branch_labels = None
depends_on = None

#: Weeks of partitions kept ready ahead of now. A history row whose week has no
#: partition cannot be written once the default partition is gone, so workers keep
#: this many ahead (worker/duties/partitions.py) and the migration starts them off.
WEEKS_AHEAD = 4

#: The functions that list, make and drop the weeks (this revision's SQL files).
FUNCTIONS = ("jobwarden_execution_partitions", "jobwarden_ensure_execution_partitions",
             "jobwarden_drop_execution_partitions")


def _views_over_executions(conn) -> list[tuple[str, str]]:
    """(name, definition) of every view that reads job_executions, as written now."""
    return list(conn.exec_driver_sql("""
        SELECT DISTINCT v.relname, pg_get_viewdef(v.oid)
        FROM pg_depend d
        JOIN pg_rewrite r ON r.oid = d.objid
        JOIN pg_class v ON v.oid = r.ev_class
        WHERE d.refobjid = 'job_executions'::regclass AND v.relname <> 'job_executions'
    """))


def upgrade() -> None:
    conn = op.get_bind()
    filled = conn.exec_driver_sql("SELECT EXISTS (SELECT 1 FROM job_executions)").scalar()
    if filled:
        # A week from a day ahead at least: no execution ending while step 1 runs can
        # finish after it.
        cutover = conn.exec_driver_sql(
            "SELECT date_trunc('week', (now() + interval '1 day') AT TIME ZONE 'UTC')"
            " AT TIME ZONE 'UTC' + interval '7 days'").scalar()
    else:
        cutover = conn.exec_driver_sql(
            "SELECT date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'").scalar()
    cutover = cutover.astimezone(UTC)  # weeks and their names are UTC's
    check = (f"ALTER TABLE job_executions ADD CONSTRAINT job_executions_before_check "
             f"CHECK (finished_at IS NULL OR finished_at < '{cutover.isoformat()}') NOT VALID")
    # The parent's lookup by execution id: a plain index (a unique one would need the
    # partition key), built on the old table first so that ATTACH adopts it.
    plain = ["CREATE INDEX {} IF NOT EXISTS job_executions_execution_idx "
             "ON job_executions (execution_id)"]
    if filled:
        op.execute(check)
        with op.get_context().autocommit_block():
            op.execute("ALTER TABLE job_executions VALIDATE CONSTRAINT job_executions_before_check")
            for statement in plain:
                op.execute(statement.format("CONCURRENTLY"))
    else:
        op.execute(check)
        op.execute("ALTER TABLE job_executions VALIDATE CONSTRAINT job_executions_before_check")
        for statement in plain:
            op.execute(statement.format(""))

    # Step 2: one short transaction (alembic's own, the migration's remaining statements).
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute("LOCK TABLE job_executions IN ACCESS EXCLUSIVE MODE")
    views = _views_over_executions(conn)
    indexes = list(conn.exec_driver_sql("""
        SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'job_executions'::regclass AND NOT i.indisunique
    """))
    for name, _ in views:
        op.execute(f"DROP VIEW {name}")
    op.execute("ALTER TABLE job_executions RENAME TO job_executions_before")
    for name, _ in indexes:  # the parent's indexes take the names the queries know
        op.execute(f"ALTER INDEX {name} RENAME TO {name}_before")
    op.execute("""
        CREATE TABLE job_executions (
            LIKE job_executions_before INCLUDING DEFAULTS INCLUDING IDENTITY
        ) PARTITION BY RANGE (finished_at)
    """)
    # The ids go on from the old table's sequence (read, not max(id): no index on id).
    old_sequence = conn.exec_driver_sql(
        "SELECT pg_get_serial_sequence('job_executions_before', 'id')").scalar()
    op.execute(f"SELECT setval(pg_get_serial_sequence('job_executions', 'id'), "
               f"(SELECT last_value FROM {old_sequence}), "
               f"(SELECT is_called FROM {old_sequence}))")
    outcomes = conn.exec_driver_sql("""
        SELECT pg_get_constraintdef(oid) FROM pg_constraint
        WHERE conrelid = 'job_executions_before'::regclass
          AND conname = 'job_executions_outcome_check'
    """).scalar()
    op.execute(f"ALTER TABLE job_executions ADD CONSTRAINT job_executions_outcome_check "
               f"{outcomes}")
    # The old table's non-unique indexes, on the parent: ATTACH adopts the old ones as
    # its partitions' (equal definitions), building nothing.
    for _, definition in indexes:
        op.execute(definition)
    op.execute("ALTER TABLE job_executions ATTACH PARTITION job_executions_before DEFAULT")
    for function in FUNCTIONS:
        op.execute(load_sql(function, revision))
    # The cutover's week first: the weeks before it are the default's.
    first = f"job_executions_w{cutover:%Y%m%d}"
    op.execute(f"CREATE TABLE {first} PARTITION OF job_executions FOR VALUES "
               f"FROM ('{cutover.isoformat()}') TO ('{cutover.isoformat()}'::timestamptz "
               f"+ interval '7 days')")
    op.execute(f"SELECT jobwarden_ensure_execution_partitions(interval '{WEEKS_AHEAD} weeks')")
    for name, definition in views:
        op.execute(f"CREATE VIEW {name} AS {definition}")


def downgrade() -> None:
    conn = op.get_bind()
    op.execute("LOCK TABLE job_executions IN ACCESS EXCLUSIVE MODE")
    views = _views_over_executions(conn)
    for name, _ in views:
        op.execute(f"DROP VIEW {name}")
    # Retention never drops the default partition: it is always there to detach.
    op.execute("ALTER TABLE job_executions DETACH PARTITION job_executions_before")
    op.execute("ALTER TABLE job_executions_before DROP CONSTRAINT IF EXISTS "
               "job_executions_before_check")
    op.execute("""
        INSERT INTO job_executions_before OVERRIDING SYSTEM VALUE
        SELECT * FROM job_executions
    """)
    op.execute("""
        SELECT setval(pg_get_serial_sequence('job_executions_before', 'id'),
                      greatest((SELECT max(id) FROM job_executions_before), 1))
    """)
    op.execute("DROP TABLE job_executions")
    op.execute("ALTER TABLE job_executions_before RENAME TO job_executions")
    for (name,) in conn.exec_driver_sql("""
            SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'job_executions'::regclass AND right(c.relname, 7) = '_before'"""):
        op.execute(f"ALTER INDEX {name} RENAME TO {name.removesuffix('_before')}")
    op.execute("DROP INDEX IF EXISTS job_executions_execution_idx")
    op.execute("DROP FUNCTION IF EXISTS jobwarden_drop_execution_partitions(interval)")
    op.execute("DROP FUNCTION IF EXISTS jobwarden_ensure_execution_partitions(interval)")
    op.execute("DROP FUNCTION IF EXISTS jobwarden_execution_partitions()")
    for name, definition in views:
        op.execute(f"CREATE VIEW {name} AS {definition}")
