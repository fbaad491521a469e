"""The database's code has a current file: a database migrated from empty to head holds
exactly the functions, triggers, views and indexes that worker/store/sql/schema/ and
worker/store/schema.py make.

One database is migrated; another is built from the current files alone (the functions
indexes are built on, schema.py's tables and indexes, then the other files). Their
catalogues are compared object by object: a function by pg_get_functiondef (its text and
its settings, `SET jit = off` too), a trigger, view and index by their definitions. A
current file changed without a migration that applies it fails here, and so does a
migration that leaves behind an object no file has.
"""

from __future__ import annotations

import difflib
import re

import psycopg
import pytest
from sqlalchemy import create_engine

import jobwarden.console.data.schema  # noqa: F401  (adds the console's tables to the metadata)
from jobwarden.worker.store.db import migrate, migrations_dir, sqlalchemy_url
from jobwarden.worker.store.schema import metadata
from jobwarden.worker.store.schema_sql import AFTER_TABLES, BEFORE_TABLES, SCHEMA, load_sql

#: What the comparison reads: (kind, name, definition) of every object in `public` that
#: is Jobwarden's own (not an extension's, nor the migrations' bookkeeping), and the
#: indexes of every table but the history's partitions, which the runtime makes and drops.
CATALOGUE = """
    SELECT 'function', p.oid::regprocedure::text, pg_get_functiondef(p.oid)
    FROM pg_proc p
    WHERE p.pronamespace = 'public'::regnamespace
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                      AND d.objid = p.oid AND d.deptype = 'e')
    UNION ALL
    SELECT 'trigger', t.tgname, pg_get_triggerdef(t.oid)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
    UNION ALL
    SELECT 'view', c.relname, pg_get_viewdef(c.oid)
    FROM pg_class c
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('v', 'm')
    UNION ALL
    SELECT 'index', c.relname, pg_get_indexdef(c.oid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_class t ON t.oid = i.indrelid
    WHERE t.relnamespace = 'public'::regnamespace AND NOT t.relispartition
      AND t.relname NOT IN ('alembic_version', 'jobwarden_alembic_version')
"""


def catalogue(url: str) -> dict[tuple[str, str], str]:
    with psycopg.connect(url) as conn:
        return {(kind, name): definition
                for kind, name, definition in conn.execute(CATALOGUE)}


def build_from_files(url: str) -> None:
    """A database made from the current files alone, as no migration runs."""
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.begin() as conn:
            # psycopg's own execute: the files' `%I` (format()) is no placeholder.
            raw = conn.connection.driver_connection
            for name in BEFORE_TABLES:
                raw.execute(load_sql(name))
            metadata.create_all(conn)
            for name in AFTER_TABLES:
                raw.execute(load_sql(name))
    finally:
        engine.dispose()


def test_a_database_migrated_to_head_has_exactly_the_code_of_the_current_files(
        empty_database, second_empty_database):
    migrate(empty_database)
    build_from_files(second_empty_database)
    migrated, files = catalogue(empty_database), catalogue(second_empty_database)
    kinds = {kind for kind, _ in migrated}
    assert kinds == {"function", "trigger", "view", "index"}  # the query really looked
    assert sorted(migrated.keys() - files.keys()) == []  # an object no file has
    assert sorted(files.keys() - migrated.keys()) == []  # a file no migration applied
    differ = sorted(key for key in files if migrated[key] != files[key])
    assert differ == [], "\n".join(
        line for key in differ for line in difflib.unified_diff(
            migrated[key].splitlines(), files[key].splitlines(),
            f"{key[0]} {key[1]}, migrated to head", "as the current files make it",
            lineterm=""))


def test_every_current_file_is_taken_by_the_build():
    """A file left out of BEFORE_TABLES/AFTER_TABLES would be compared with nothing."""
    assert sorted(BEFORE_TABLES + AFTER_TABLES) == sorted(
        path.stem for path in SCHEMA.glob("*.sql"))


def test_no_migration_loads_another_migration_or_its_text():
    """Each migration applies its own revision's SQL files (or the earlier revision's it
    goes back to); none imports another to borrow or edit its SQL."""
    versions = migrations_dir() / "versions"
    names = {path.stem for path in versions.glob("*.py")}
    for path in versions.glob("*.py"):
        text = path.read_text()
        assert "importlib" not in text, path.name
        assert not {n for n in names - {path.stem} if n in text}, path.name


def test_every_frozen_file_belongs_to_a_migration_that_exists():
    revisions = {re.match(r"\d+", path.name).group() for path in
                 (migrations_dir() / "versions").glob("*.py")}
    folders = {path.name for path in (SCHEMA / "revisions").iterdir()}
    assert sorted(folders - revisions) == []


def test_a_missing_file_is_named_in_one_line():
    with pytest.raises(LookupError, match=r"^no SQL file 'nothing' of revision 0070 \(.*"
                                          r"revisions/0070/nothing\.sql is missing\)$"):
        load_sql("nothing", "0070")
