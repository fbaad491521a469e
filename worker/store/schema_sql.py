"""The database's own code — its functions, triggers and views — as SQL files, by name.

`sql/schema/<concern>.sql` holds each of them as it is at the newest migration: the text
to read, and to change. A migration never reads those. It applies
`sql/schema/revisions/<its revision>/<object>.sql`, the text as of that revision, and its
downgrade the file of the revision it goes back to. A revision's files are frozen once
written: a change is a new migration with files of its own revision, so a later change
can never alter what an older migration does, and a database migrated through them all
is the same whichever version of Jobwarden ran each step. (Frozen text kept inside each
migration would do as much, but a downgrade then imports the migration it goes back to,
or copies its text.) tests/integration/test_schema_code.py migrates an empty database
and checks that its functions, triggers, views and indexes are exactly what the current
files (and schema.py's indexes) make.
"""

from __future__ import annotations

from pathlib import Path

SCHEMA = Path(__file__).resolve().parent / "sql" / "schema"

#: The current files, in the order a new database takes them: `index_functions` before
#: the tables (their indexes are built on its functions), the others after them.
BEFORE_TABLES = ("index_functions",)
AFTER_TABLES = ("notify", "rollups", "rate_limits", "history", "type_versions",
                "audit_lines", "timings", "payload")


def load_sql(name: str, revision: str | None = None) -> str:
    """The SQL file `name`: the current one (sql/schema/<name>.sql), or with `revision`,
    what migration `revision` applies (sql/schema/revisions/<revision>/<name>.sql)."""
    folder = SCHEMA if revision is None else SCHEMA / "revisions" / revision
    path = folder / f"{name}.sql"
    if not path.is_file():
        at = "" if revision is None else f" of revision {revision}"
        raise LookupError(f"no SQL file {name!r}{at} ({path} is missing)")
    return path.read_text()
