"""Alembic owns the schema: upgrading from empty gives exactly what the code expects."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

import jobwarden.console.data.schema  # noqa: F401  (adds console_users to the metadata compared below)
from jobwarden.worker.store.db import VERSION_TABLE, downgrade, migrate, sqlalchemy_url
from jobwarden.worker.store.schema import declared, metadata

ROOT = Path(__file__).resolve().parents[2]

#: Every table the migrations create, runtime and console alike: all of them are compared.
ALL_TABLES = {"background_jobs", "job_executions", "job_audit", "job_workers",
              "processed_effects", "queue_controls", "job_types", "console_users",
              "job_schedules", "job_count_deltas", "job_minute_counts",
              "console_selections", "console_selection_jobs", "console_bulk_steps",
              "job_event_totals", "job_batches", "job_batch_callbacks"}


def schema_diff(url: str) -> list:
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True,
                                                         "compare_server_default": False,
                                                         "include_name": declared})
            return [d for d in compare_metadata(ctx, metadata)
                    if not (isinstance(d, tuple) and d[0] == "remove_table"
                            and d[1].name == VERSION_TABLE)]
    finally:
        engine.dispose()


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                if declared(r[0], "table")}


def test_upgrade_from_empty_matches_the_code_schema(empty_database):
    migrate(empty_database)
    assert ALL_TABLES <= set(metadata.tables)
    assert schema_diff(empty_database) == []
    assert tables(empty_database) - {VERSION_TABLE} == set(metadata.tables)


def test_downgrade_then_upgrade_round_trips(empty_database):
    migrate(empty_database)
    downgrade(empty_database, "base")
    assert tables(empty_database) == {VERSION_TABLE}
    migrate(empty_database)
    assert schema_diff(empty_database) == []


def run_python(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "DATABASE_URL": url}, timeout=120)


def test_alembic_check_proposes_nothing_after_upgrading(empty_database):
    # Autogenerate compares the database with migrations/env.py's metadata: with the
    # runtime's tables alone it proposed dropping the console's.
    migrate(empty_database)
    result = run_python(empty_database, "-m", "alembic", "-c", "alembic.ini", "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No new upgrade operations detected" in result.stdout + result.stderr


def test_the_runtime_migrates_without_loading_the_console(empty_database):
    result = run_python(empty_database, "-c",
                        "import sys\nfrom jobwarden.worker.store.db import migrate\nmigrate()\n"
                        "print(sorted(m for m in sys.modules\n"
                        "             if m.split('.')[:2] == ['jobwarden', 'console']))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert "console_users" in tables(empty_database)  # the console's tables were created


def test_status_check_constraint_rejects_unknown_states(empty_database):
    migrate(empty_database)
    with psycopg.connect(empty_database) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO background_jobs (type, payload, status) "
                     "VALUES ('t', '{}', 'exploded')")


LEASE_CHECK = "background_jobs_lease_only_while_running_check"


@pytest.mark.parametrize("status", ["pending", "completed", "failed", "cancelled", "skipped",
                                    "unknown"])
def test_a_lease_on_a_job_that_is_not_running_is_refused(empty_database, status):
    migrate(empty_database)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        job_id = conn.execute(
            "INSERT INTO background_jobs (type, payload, status, execution_id, "
            "lease_expires_at) VALUES ('t', '{}', 'running', gen_random_uuid(), "
            "now() + interval '30 seconds') RETURNING id").fetchone()[0]
        # a move out of running that forgets the lease
        with pytest.raises(psycopg.errors.CheckViolation, match=LEASE_CHECK):
            conn.execute("UPDATE background_jobs SET status = %s WHERE id = %s",
                         [status, job_id])
        conn.execute("UPDATE background_jobs SET status = %s, lease_expires_at = NULL "
                     "WHERE id = %s", [status, job_id])
        with pytest.raises(psycopg.errors.CheckViolation, match=LEASE_CHECK):
            conn.execute("UPDATE background_jobs SET lease_expires_at = now() WHERE id = %s",
                         [job_id])


def test_the_lease_check_is_validated_and_clears_leases_left_on_rows_not_running(
        empty_database):
    migrate(empty_database, "0019")
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute("INSERT INTO background_jobs (type, payload, status, execution_id, "
                     "lease_expires_at) VALUES "
                     "('t', '{}', 'completed', gen_random_uuid(), now() - interval '1 hour'), "
                     "('t', '{}', 'running', gen_random_uuid(), now() + interval '1 minute')")
    migrate(empty_database)
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT convalidated FROM pg_constraint WHERE conname = %s",
                            [LEASE_CHECK]).fetchone() == (True,)
        assert conn.execute("SELECT status, lease_expires_at IS NOT NULL FROM background_jobs "
                            "ORDER BY id").fetchall() == [("completed", False),
                                                          ("running", True)]
    downgrade(empty_database, "0019")
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT count(*) FROM pg_constraint WHERE conname = %s",
                            [LEASE_CHECK]).fetchone() == (0,)


def test_names_stored_with_capitals_are_lower_cased_so_their_users_can_sign_in(empty_database):
    migrate(empty_database, "0004")
    with psycopg.connect(empty_database) as conn:
        conn.execute("INSERT INTO console_users (username, password_hash, role) VALUES "
                     "('Alice', 'x', 'admin'), ('Bob', 'x', 'viewer'), ('bob', 'x', 'viewer')")
    migrate(empty_database)
    with psycopg.connect(empty_database) as conn:
        names = sorted(r[0] for r in conn.execute("SELECT username FROM console_users"))
    # Alice can sign in as 'alice' again; Bob and bob would collide, so both stay.
    assert names == ["Bob", "alice", "bob"]


def test_schedules_published_before_0082_keep_their_declaration_and_a_downgrade_undoes_edits(
        empty_database):
    """0082 backfills `declared` from every existing row (all were published from code);
    its downgrade drops console-only schedules and puts edited ones back to the code."""
    migrate(empty_database, "0079")
    with psycopg.connect(empty_database) as conn:
        conn.execute("INSERT INTO job_schedules (type, cron, timezone, catch_up, payload, "
                     "next_run_at, published_by) VALUES ('report', '0 3 * * *', "
                     "'Europe/Berlin', true, '{\"a\": 1}', now(), 'w1')")
    migrate(empty_database)
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT declared, edited_by, revision FROM job_schedules"
                            ).fetchone() == ({"cron": "0 3 * * *", "timezone": "Europe/Berlin",
                                              "catch_up": True, "payload": {"a": 1}}, None, 1)
        conn.execute("UPDATE job_schedules SET cron = '0 4 * * *', edited_by = 'ada'")
        conn.execute("INSERT INTO job_schedules (type, cron, next_run_at, published_by, "
                     "edited_by) VALUES ('console_only', '0 5 * * *', now(), 'console', 'ada')")
    downgrade(empty_database, "0079")
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT type, cron FROM job_schedules").fetchall() == [
            ("report", "0 3 * * *")]


def test_0094_folds_running_counts_into_pending_and_its_downgrade_splits_them_out(
        empty_database):
    """The count rollup's sums survive both ways: at 0093 it counts running apart, at
    0094 as pending; a downgrade recounts running from the jobs."""
    def counts(conn) -> dict:
        return {(s, q, t): n for s, q, t, n in conn.execute(
            "SELECT status, queue, type, sum(jobs) FROM job_count_deltas "
            "GROUP BY 1, 2, 3 HAVING sum(jobs) <> 0")}

    def real(conn, fold: bool) -> dict:
        status = "CASE WHEN status = 'running' THEN 'pending' ELSE status END" if fold \
            else "status"
        return {(s, q, t): n for s, q, t, n in conn.execute(
            f"SELECT {status}, queue, type, count(*) FROM background_jobs GROUP BY 1, 2, 3")}

    migrate(empty_database, "0093")
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute("INSERT INTO background_jobs (queue, type, payload) "
                     "SELECT 'q' || (g % 2), 't', '{}' FROM generate_series(1, 9) g")
        conn.execute("UPDATE background_jobs SET status = 'running', "
                     "execution_id = gen_random_uuid(), lease_expires_at = now() + "
                     "interval '1 minute' WHERE id % 3 <> 0")
        assert ("running", "q1", "t") in counts(conn) and counts(conn) == real(conn, False)
    migrate(empty_database)
    with psycopg.connect(empty_database) as conn:
        assert counts(conn) == real(conn, True) == {("pending", "q0", "t"): 4,
                                                    ("pending", "q1", "t"): 5}
        assert conn.execute("SELECT count(*) FROM job_count_deltas "
                            "WHERE status = 'running'").fetchone() == (0,)
    downgrade(empty_database, "0093")
    with psycopg.connect(empty_database, autocommit=True) as conn:
        assert counts(conn) == real(conn, False)
        # The old functions again: a claim counts running apart.
        conn.execute("UPDATE background_jobs SET status = 'running', "
                     "execution_id = gen_random_uuid(), lease_expires_at = now() + "
                     "interval '1 minute' WHERE status = 'pending'")
        assert counts(conn) == real(conn, False) == {("running", "q0", "t"): 4,
                                                     ("running", "q1", "t"): 5}
