"""The clean_db fixture truncates only the tables a test wrote to: whatever a test did,
the next one must find every table, sequence and table statistic as a TRUNCATE of all
of them leaves it, and none of the tables a test made for itself."""

from __future__ import annotations

import threading

import psycopg
import pytest

from jobwarden import enqueue
from tests.conftest import _MIGRATED, _emptied
from tests.helpers import wait_for


def state(url: str) -> dict[str, tuple]:
    """Each public table's rows, main and TOAST blocks and statistics; each sequence's
    next value."""
    with psycopg.connect(url) as conn:
        tables = {name: (conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0],
                         size, toast, reltuples, relpages)
                  for name, size, toast, reltuples, relpages in conn.execute(
                      "SELECT c.relname, pg_relation_size(c.oid), "
                      "coalesce(pg_relation_size(nullif(c.reltoastrelid, 0)), 0), "
                      "c.reltuples, c.relpages FROM pg_class c "
                      "JOIN pg_namespace n ON n.oid = c.relnamespace "
                      "WHERE n.nspname = 'public' AND c.relkind = 'r' "
                      "AND c.relname NOT IN ('alembic_version', 'jobwarden_alembic_version')").fetchall()}
        sequences = {f"seq {name}": (last, start) for name, last, start in conn.execute(
            "SELECT sequencename, last_value, start_value FROM pg_sequences "
            "WHERE schemaname = 'public'").fetchall()}
    return {**tables, **sequences}


def as_truncated(before: dict[str, tuple]) -> dict[str, tuple]:
    """What TRUNCATE … RESTART IDENTITY leaves: no row, no block, no statistics, every
    sequence not yet called."""
    return {name: (None, value[1]) if name.startswith("seq ") else (0, 0, 0, -1.0, 0)
            for name, value in before.items()}


def test_no_table_of_the_test_database_is_autovacuumed(clean_db):
    """On either server: an autovacuum after a TRUNCATE would leave statistics (reltuples
    0) where the next test expects none (tests/conftest.py, `_never_autovacuumed`)."""
    with psycopg.connect(clean_db) as conn:
        options = dict(conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r'").fetchall())
    migrated = _MIGRATED[clean_db] & options.keys()
    assert len(migrated) > 30  # every migrated table, partitions included
    assert [t for t in sorted(migrated)
            if "autovacuum_enabled=false" not in (options[t] or [])] == []


def test_a_clean_database_is_as_a_truncate_of_every_table_leaves_it(clean_db):
    fresh = state(clean_db)
    assert fresh == as_truncated(fresh)


@pytest.mark.parametrize("write", [
    "enqueued",           # rows, and the rollup's deltas and minute counts by trigger
    "deleted",            # a row inserted and deleted: no row, a block, a sequence moved
    "rolled back",        # a block and a sequence moved, no row ever committed
    "refused",            # a sequence moved by an insert its NOT NULL refused: no block
    "analyzed",           # an empty table analyzed: statistics, no block
    "toasted",            # a value stored out of line
    "own table",          # a table of the test's own
    "lines beside jobs",  # audit lines and jobs, no audit row: CASCADE reaches job_audit,
                          # whose TRUNCATE trigger empties the lines
])
def test_whatever_a_test_wrote_the_next_finds_every_table_as_truncated(clean_db, write):
    with psycopg.connect(clean_db, autocommit=True) as conn:
        if write == "enqueued":
            enqueue(conn, "clean.probe", {"n": 1})
        elif write == "deleted":
            conn.execute("INSERT INTO console_users (username, password_hash, role) "
                         "VALUES ('gone', 'x', 'viewer')")
            conn.execute("DELETE FROM console_users")
        elif write == "rolled back":
            with pytest.raises(psycopg.errors.RaiseException), conn.transaction():
                conn.execute("INSERT INTO job_batches (description) VALUES ('never')")
                conn.execute("DO $$ BEGIN RAISE 'roll back'; END $$")
        elif write == "refused":
            with pytest.raises(psycopg.errors.NotNullViolation):
                conn.execute("INSERT INTO job_audit (job_id) VALUES (NULL)")
        elif write == "analyzed":
            conn.execute("ANALYZE queue_controls")
        elif write == "toasted":
            conn.execute("INSERT INTO processed_effects (key, result) "
                         "SELECT 'big', jsonb_build_object('text', string_agg(md5(g::text), '')) "
                         "FROM generate_series(1, 4000) g")
        elif write == "lines beside jobs":
            enqueue(conn, "clean.probe", {"n": 1})
            conn.execute("INSERT INTO job_audit_lines (id, at, last_at, actor, role, action, "
                         "reason, jobs) VALUES (1, now(), now(), 'ada', 'admin', 'retry', "
                         "'probe', 1)")
        else:
            conn.execute("CREATE TABLE race_log (n int)")
            conn.execute("INSERT INTO race_log VALUES (1)")
    written = state(clean_db)
    assert written != as_truncated(written) or write == "own table", \
        f"the {write!r} write left no trace to clean"
    assert state(_emptied(clean_db)) == as_truncated(
        {name: value for name, value in written.items() if name != "race_log"})


def test_a_statement_left_running_that_deadlocks_with_the_truncate_is_waited_out(clean_db):
    """A reader an earlier test left running (a console thread's /metrics scrape) locks
    a history partition, then background_jobs; the TRUNCATE locks them the other way
    round. The server fails one side of that deadlock, the TRUNCATE (it waited first),
    which is then tried again and empties both."""
    with psycopg.connect(clean_db, autocommit=True) as conn:
        enqueue(conn, "clean.probe", {"n": 1})
        # The history row goes to this week's partition, as a finish writes it.
        partition = conn.execute(
            "INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, "
            "worker_id, scheduled_at, started_at, finished_at, outcome) SELECT id, "
            "gen_random_uuid(), 1, queue, type, 'w', now(), now(), now(), 'completed' "
            "FROM background_jobs "
            "RETURNING tableoid::regclass::text").fetchone()[0]
    reader = psycopg.connect(clean_db)
    reader.execute(f"LOCK TABLE {partition} IN ACCESS SHARE MODE")
    read = threading.Event()

    def read_jobs_once_the_truncate_waits() -> None:
        # The TRUNCATE holds background_jobs and waits for the partition: this waits
        # for background_jobs, and closes the cycle.
        with psycopg.connect(clean_db, autocommit=True) as watch:
            wait_for(lambda: watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE 'TRUNCATE%'").fetchone()[0],
                message="the TRUNCATE waiting for the partition")
        reader.execute("SELECT count(*) FROM background_jobs").fetchone()
        reader.commit()
        read.set()

    thread = threading.Thread(target=read_jobs_once_the_truncate_waits)
    thread.start()
    try:
        _emptied(clean_db)
    finally:
        thread.join(30)
        reader.close()
    assert read.is_set()
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT (SELECT count(*) FROM background_jobs), "
                            f"(SELECT count(*) FROM {partition})").fetchone() == (0, 0)
