"""Named SQL queries, loaded from worker/store/sql/*.sql — the one place the runtime's SQL lives.

The console keeps its own queries in console/data/sql and loads them with `load_queries`.

Each query in a .sql file starts with a header line `-- name: query_name` followed by a
one-line comment saying what it does. Parameters use psycopg's `%(name)s` style, which
both psycopg and SQLAlchemy's `exec_driver_sql` accept. worker/store/jobstore.py runs
them, and nothing else does.

The text sent is the file's without its comment lines and indentation, under one line
naming the query (`-- jobwarden: claim_jobs`): that name is what pg_stat_statements and
pg_stat_activity show. It also keeps the claim and the finish under the 4,096 bytes up to
which psycopg caches a statement's placeholder parse (commented, they were 6-7 kB and
parsed again on every call, about 30 us each).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: A connection in the caller's transaction, as the JobStore takes it: a psycopg
#: Connection, or a SQLAlchemy Connection or Session. Any, because the store tells these
#: unrelated classes apart by what they have, which no union of them would let it say.
CallerConnection = Any

_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def compact(name: str, body: str) -> str:
    """`body` as sent: its name on the first line, then its lines without the comment
    lines and the indentation (no statement here has a string literal across lines)."""
    lines = (line.strip() for line in body.splitlines())
    return "\n".join([f"-- jobwarden: {name}",
                      *(line for line in lines if line and not line.startswith("--"))])


def load_queries(folder: Path) -> dict[str, str]:
    """Every `-- name:` query of the .sql files in `folder`; a name defined twice is an error."""
    queries: dict[str, str] = {}
    for path in sorted(folder.glob("*.sql")):
        text = path.read_text()
        parts = _HEADER.split(text)
        # parts = [preamble, name1, body1, name2, body2, ...]
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in queries:
                raise RuntimeError(f"query {name!r} defined twice (second in {path.name})")
            queries[name] = compact(name, body)
    return queries


class Query(str):
    """One named query: its SQL text, and its name (for logs and errors). The JobStore
    runs only these (worker/store/jobstore.py)."""

    name: str

    def __new__(cls, name: str, sql: str) -> Query:
        query = super().__new__(cls, sql)
        query.name = name
        return query


class Queries(dict[str, Query]):
    """Named queries, readable as attributes: `Q.claim_jobs`."""

    def __getattr__(self, name: str) -> Query:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no SQL query named {name!r}") from None


def without_conflict_clause(name: str, sql: str) -> Query:
    """`sql` cut before its `ON CONFLICT` clause, which must be its last but for
    RETURNING. For enqueue_jobs when no job of the batch has an idempotency key: an
    INSERT with ON CONFLICT inserts every row speculatively (a confirmation record per
    row in the WAL, and the arbiter index checked first), key or no key."""
    head, sep, tail = sql.partition("\nON CONFLICT ")
    returning = tail[tail.index("\nRETURNING "):] if sep else ""
    if not sep or not returning:
        raise RuntimeError(f"{name}: no ON CONFLICT clause before RETURNING to cut")
    return Query(name, head + returning)


_loaded = load_queries(Path(__file__).parent / "sql")
#: All named queries: `Q.claim_jobs` or `Q["claim_jobs"]`.
Q = Queries({name: Query(name, sql) for name, sql in _loaded.items()})
Q["enqueue_jobs_keyless"] = without_conflict_clause("enqueue_jobs_keyless",
                                                    _loaded["enqueue_jobs"])


def batch_params(rows: list[dict[str, Any]], id_key: str = "job_id") -> dict[str, Any]:
    """Parameters of a batch statement over jsonb_to_recordset(%(rows)s): the rows sorted
    by job id (so concurrent batches lock rows in one order)."""
    rows = sorted(rows, key=lambda r: r[id_key])
    return {"rows": json.dumps(rows, default=str)}


def query_name(sql: str | None, queries: Mapping[str, str] | None = None) -> str:
    """The name of a named query (of `queries`, the runtime's by default) from its text,
    for logs; "an unnamed statement" when it is none of them."""
    text = (sql or "").strip()
    for name, body in (Q if queries is None else queries).items():
        if body == text:
            return name
    return "an unnamed statement"


def describe_db_error(exc: BaseException, queries: Mapping[str, str] | None = None) -> str:
    """`UniqueViolation (SQLSTATE 23505) in console_user_upsert`: what to log about a
    database error. Never its message or bound values: PostgreSQL's DETAIL and the
    driver's parameter dump may hold a password hash, a key or a payload. `queries` names
    the statement (the runtime's queries by default)."""
    orig = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    sqlstate = getattr(orig, "sqlstate", None)
    statement = getattr(exc, "statement", None)
    where = f" in {query_name(statement, queries)}" if statement else ""
    return f"{type(orig).__name__}{f' (SQLSTATE {sqlstate})' if sqlstate else ''}{where}"
