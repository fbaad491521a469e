"""Jobwarden keeps its migration revision in a table of its own, so an application's own
Alembic (Flask-Migrate) shares the database: each migrates, in either order, without
reading the other's revision. A database an earlier release migrated (its revision in
Alembic's default table) is read as it is and moved by `jobwarden migrate`. Two migrates
at once: the second waits, then finds nothing to do. A migrate on a schema a newer
Jobwarden made, or as a role that may not create tables: one line."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from alembic import command
from alembic.config import Config

from jobwarden.worker.store import db as dbmod
from tests.helpers import scalar
from tests.integration.test_schema_revision import HEAD, NEWER, ROOT, jobwarden

APP_REVISION = "a1b2c3d4e5f6"


def app_alembic(url: str) -> Config:
    """The application's own Alembic environment (app_alembic/): one revision that
    creates `orders`."""
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "app_alembic"))
    cfg.set_main_option("sqlalchemy.url", dbmod.sqlalchemy_url(url))
    return cfg


def revisions(url: str, table: str) -> list[str]:
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
            return []
        return [r[0] for r in conn.execute(f"SELECT version_num FROM {table}")]


@pytest.mark.parametrize("first", ["app", "jobwarden"])
def test_the_application_and_jobwarden_each_migrate_the_same_database(empty_database, first):
    url, app = empty_database, app_alembic(empty_database)
    if first == "app":
        command.upgrade(app, "head")
        # Before Jobwarden's own migrate, the app's revision is not taken for Jobwarden's.
        result = jobwarden(url, "stats")
        assert result.returncode == 1
        assert result.stderr == ("jobwarden: the database has no Jobwarden tables yet: run "
                                 "`jobwarden migrate` first\n")
    result = jobwarden(url, "migrate")
    assert result.returncode == 0, result.stderr
    command.upgrade(app, "head")  # again, or for the first time: it finds its own revision
    assert revisions(url, "alembic_version") == [APP_REVISION]
    assert revisions(url, dbmod.VERSION_TABLE) == [HEAD]
    assert scalar(url, "SELECT count(*) FROM orders") == 0
    result = jobwarden(url, "stats", "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr


def earlier_release(url: str) -> None:
    """The database as an earlier release left it: migrated, its revision in Alembic's
    default table."""
    dbmod.migrate(url)
    with psycopg.connect(url) as conn:
        conn.execute(f"ALTER TABLE {dbmod.VERSION_TABLE} RENAME TO alembic_version")
        conn.execute(f"ALTER TABLE alembic_version RENAME CONSTRAINT {dbmod.VERSION_TABLE}_pkc "
                     "TO alembic_version_pkc")


def test_a_database_an_earlier_release_migrated_is_read_and_moved_by_migrate(empty_database):
    url = empty_database
    earlier_release(url)
    result = jobwarden(url, "stats", "--json")  # read where the earlier release kept it
    assert result.returncode == 0 and result.stderr == "", result.stderr
    result = jobwarden(url, "migrate")
    assert result.returncode == 0, result.stderr
    assert revisions(url, dbmod.VERSION_TABLE) == [HEAD]
    assert scalar(url, "SELECT to_regclass('alembic_version') IS NULL")
    result = jobwarden(url, "stats", "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_an_earlier_release_sharing_its_table_with_the_app_moves_its_revision_alone(
        empty_database):
    url = empty_database
    earlier_release(url)
    with psycopg.connect(url) as conn:  # the application's own Alembic stamped it too
        conn.execute("INSERT INTO alembic_version VALUES (%s)", (APP_REVISION,))
    result = jobwarden(url, "stats", "--json")  # Jobwarden's own revision is read
    assert result.returncode == 0 and result.stderr == "", result.stderr
    result = jobwarden(url, "migrate")
    assert result.returncode == 0, result.stderr
    assert revisions(url, dbmod.VERSION_TABLE) == [HEAD]
    assert revisions(url, "alembic_version") == [APP_REVISION]


def test_an_earlier_release_behind_the_code_is_moved_and_brought_to_head(empty_database):
    url = empty_database
    dbmod.migrate(url, dbmod.code_revisions()[HEAD][0])
    with psycopg.connect(url) as conn:
        conn.execute(f"ALTER TABLE {dbmod.VERSION_TABLE} RENAME TO alembic_version")
    assert "1 migration behind" in jobwarden(url, "stats").stderr
    assert jobwarden(url, "migrate").returncode == 0
    assert revisions(url, dbmod.VERSION_TABLE) == [HEAD]
    assert revisions(url, "alembic_version") == []


def test_three_migrates_at_once_each_end_well_and_the_database_is_at_head(empty_database):
    url = empty_database
    argv = [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "migrate"]
    env = {"DATABASE_URL": url}

    def run(_: int) -> subprocess.CompletedProcess:
        return subprocess.run(argv, cwd=ROOT, env=dict(os.environ, **env),
                              capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(run, range(3)))
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    assert revisions(url, dbmod.VERSION_TABLE) == [HEAD]


def test_migrate_on_a_schema_a_newer_jobwarden_made_says_so_in_one_line(empty_database):
    url = empty_database
    dbmod.migrate(url)
    with psycopg.connect(url) as conn:
        conn.execute(f"UPDATE {dbmod.VERSION_TABLE} SET version_num = %s", (NEWER,))
    result = jobwarden(url, "migrate")
    assert result.returncode == 0
    assert result.stderr == (f"jobwarden: the database is at revision {NEWER}, which this "
                             f"Jobwarden ({HEAD}) does not know: a newer Jobwarden migrated "
                             "it; nothing migrated\n")
    assert revisions(url, dbmod.VERSION_TABLE) == [NEWER]


@pytest.fixture
def role_without_rights(server_url, empty_database):
    """A role that may connect to the empty database but create nothing in it."""
    name = f"jobwarden_no_rights_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {name}")
        admin.execute(f"CREATE ROLE {name} LOGIN")
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    parts = urlsplit(empty_database)
    yield urlunsplit(parts._replace(netloc=f"{name}@{parts.netloc.rpartition('@')[2]}"))
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {name}")
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {name}")


def test_migrate_as_a_role_that_may_not_create_tables_says_so_in_one_line(
        role_without_rights):
    result = jobwarden(role_without_rights, "migrate")
    assert result.returncode == 1
    assert result.stderr == ("jobwarden: the database refused it: permission denied for "
                             "schema public\n")


def test_the_applications_autogenerate_leaves_jobwardens_tables_out(empty_database):
    """With `include_name` from jobwarden.app_migrations, the application's autogenerate on
    a database holding both sees its own table only; without it, it would drop Jobwarden's."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import Column, Integer, MetaData, Table, Text, create_engine

    from jobwarden.app_migrations import include_name

    url = empty_database
    command.upgrade(app_alembic(url), "head")
    assert jobwarden(url, "migrate").returncode == 0
    with psycopg.connect(url) as conn:  # a week of history: a partition of its own
        assert conn.execute("SELECT count(*) FROM pg_inherits").fetchone()[0] > 0
    app = MetaData()
    Table("orders", app, Column("id", Integer, primary_key=True), Column("email", Text))
    engine = create_engine(dbmod.sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            def diff(**opts) -> list:
                ctx = MigrationContext.configure(conn, opts={"compare_type": True, **opts})
                return compare_metadata(ctx, app)

            dropped = {d[1].name for d in diff() if d[0] == "remove_table"}
            assert {"background_jobs", "console_users", dbmod.VERSION_TABLE} <= dropped
            assert diff(include_name=include_name) == []
    finally:
        engine.dispose()
