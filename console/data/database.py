"""The console's store: the one module of the console that runs SQL.

Queries are named in console/data/sql (and worker/store/sql, for the runtime's reads the console
shares) and reached as attributes of `CQ`: `reader.all(CQ.console_jobs_page, ...)`. A
misspelt name raises AttributeError where it is read, and tests/unit/test_console_store.py
reads every `CQ.<name>` in console/ against the .sql files, so a typo fails in the unit
tier instead of when a page is first requested. The store's methods refuse a query given
as a string.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import current_app
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import Connection, create_engine

from jobwarden.worker.store.db import database_url, sqlalchemy_url
from jobwarden.worker.store.queries import Q as RUNTIME_QUERIES
from jobwarden.worker.store.queries import describe_db_error, load_queries

#: One row as the database returned it: column name -> value. Its shape is the SQL file's,
#: which the type checker cannot read; the templates and views name the columns.
Row = dict[str, Any]


@dataclass(frozen=True)
class Query:
    """One named query: its name (for logs) and its SQL."""

    name: str
    sql: str


class _Catalogue:
    """Every query the console may run, one attribute each: `CQ.console_jobs_page`."""

    def __init__(self, queries: Mapping[str, str]) -> None:
        self._by_name = {name: Query(name, sql) for name, sql in queries.items()}
        self.__dict__.update(self._by_name)

    def __getattr__(self, name: str) -> Query:
        # Only reached for a name that is not a query: the attributes above are found first.
        raise AttributeError(f"no console or runtime query named {name!r} (console/data/sql, "
                             "worker/store/sql)")


def _console_queries() -> dict[str, str]:
    """The console's own queries (console/data/sql) beside the runtime's; a name clash is
    an error."""
    own = load_queries(Path(__file__).parent / "sql")
    clash = sorted(set(own) & set(RUNTIME_QUERIES))
    if clash:
        raise RuntimeError(f"console/data/sql redefines runtime queries: {', '.join(clash)}")
    return {**RUNTIME_QUERIES, **own}


_SQL = _console_queries()
#: Every query the console may run, by attribute.
CQ = _Catalogue(_SQL)


def query_names() -> dict[str, Query]:
    """Every query by name (for tests and tools)."""
    return dict(CQ._by_name)


def describe(error: BaseException) -> str:
    """What to log about a database error: class, SQLSTATE and the statement's name only."""
    return describe_db_error(error, _SQL)


def _checked(query: Query) -> Query:
    if not isinstance(query, Query):
        raise TypeError(f"pass a query as CQ.<name>, not {query!r}")
    return query


class Reader:
    """Named statements on one open connection (a page's reads, or one transaction).

    `conn` is the SQLAlchemy Connection, for the runtime's operations
    (jobwarden.worker.ops.operations), which run their own audited statements inside the
    same transaction."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def all(self, query: Query, **params: Any) -> list[Row]:
        """Every row of `query`, as dicts."""
        return _rows(self.conn, query, params)

    def one(self, query: Query, **params: Any) -> Row | None:
        """The first row of `query`, or None."""
        found = _rows(self.conn, query, params)
        return found[0] if found else None

    def row(self, query: Query, **params: Any) -> Row:
        """The row of a query that always returns one (an aggregate, an EXISTS)."""
        return _always(query, self.one(query, **params))

    def run(self, query: Query, **params: Any) -> int:
        """Run a statement that returns no rows; the number of rows it changed."""
        sql = _checked(query).sql
        changed: int = self.conn.exec_driver_sql(sql, params).rowcount
        return changed


#: What a JSON value too deep for Python's parser reads as (PostgreSQL stores thousands of
#: levels; json.loads stops near a thousand): the page shows this, not an error.
TOO_DEEP = {"[not shown]": "nested deeper than the console reads"}
#: And one holding an integer past Python's digit limit (PostgreSQL stores 131,072
#: digits; Python reads 4,300).
TOO_LONG_INTEGER = {"[not shown]": "holds an integer of more digits than the console reads"}


def load_json(text: str | bytes) -> Any:
    """json.loads, except that a value Python does not read (nested too deeply, or with
    too long an integer) reads as TOO_DEEP or TOO_LONG_INTEGER."""
    try:
        return json.loads(text)
    except RecursionError:
        return TOO_DEEP
    except json.JSONDecodeError:
        raise  # not JSON at all: never PostgreSQL's output
    except ValueError:
        return TOO_LONG_INTEGER


class ReadingDatabase:
    """One server's engine, for reads: what the pages of figures are given
    (jobwarden.console.web.reads.page_reads), the primary or its read replica alike. It
    has no `transaction()`: an action needs the primary, `ConsoleDatabase`."""

    def __init__(self, url: str, pool_size: int = 5, *,
                 connect_args: Mapping[str, Any] | None = None) -> None:
        self.url = url
        self.engine = create_engine(
            sqlalchemy_url(self.url),
            pool_size=pool_size,
            max_overflow=5,
            pool_pre_ping=True,
            pool_recycle=1800,
            # Errors must not carry bound values (password hashes, reasons, keys) into logs.
            hide_parameters=True,
            json_deserializer=load_json,
            # No server-side prepared statements: optional-filter queries must be planned
            # with their actual parameters, never with a generic plan.
            connect_args={"prepare_threshold": None, "application_name": "jobwarden-console",
                          **(connect_args or {})},
        )

    def where(self) -> str:
        """`host:port/dbname` of this database, for messages: never the user or password."""
        return where(self.url)

    def all(self, query: Query, **params: Any) -> list[Row]:
        """Every row of `query` as dicts (a short read-only transaction)."""
        with self.reading() as reader:
            return reader.all(query, **params)

    def one(self, query: Query, **params: Any) -> Row | None:
        """The first row of `query`, or None."""
        with self.reading() as reader:
            return reader.one(query, **params)

    def row(self, query: Query, **params: Any) -> Row:
        """The row of a query that always returns one (an aggregate, an EXISTS)."""
        return _always(query, self.one(query, **params))

    @contextmanager
    def reading(self) -> Iterator[Reader]:
        """One connection for several reads that belong together (one page)."""
        with self.engine.connect() as conn:
            yield _planned(conn)

    def probe(self, query: Query, **params: Any) -> Row:
        """The row of a statement that reads no table (a server's WAL position), alone on
        its connection: without the planner settings of `reading()`, one round trip less
        on every page that asks."""
        with self.engine.connect() as conn:
            return _always(query, next(iter(_rows(conn, query, params)), None))

    def dispose(self) -> None:
        self.engine.dispose()


class ConsoleDatabase(ReadingDatabase):
    """The console's primary database (DATABASE_URL): every action, and every read that
    decides one. `get_db()` gives it."""

    def __init__(self, url: str | None = None, pool_size: int = 5) -> None:
        super().__init__(url or database_url(), pool_size)

    @contextmanager
    def transaction(self) -> Iterator[Reader]:
        """Statements in one transaction that commits on success."""
        with self.engine.begin() as conn:
            yield _planned(conn)


def where(url: str) -> str:
    """`host:port/dbname` of a database URL, for messages: never the user or password."""
    info = conninfo_to_dict(url)
    host = info.get("host") or "localhost"
    port = f":{info['port']}" if info.get("port") else ""
    return f"{host}{port}/{info.get('dbname') or info.get('user') or '?'}"


@contextmanager
def connected(url: str | None = None) -> Iterator[ConsoleDatabase]:
    """A store for one command (`jobwarden user add`, the demo): one connection, closed after."""
    db = ConsoleDatabase(url, pool_size=1)
    try:
        yield db
    finally:
        db.dispose()


def _always(query: Query, row: Row | None) -> Row:
    if row is None:
        raise LookupError(f"query {query.name} returned no row, and always returns one")
    return row


def _planned(conn: Connection) -> Reader:
    """A reader whose transaction plans without JIT. The console's statements are short
    reads, and on tables without statistics (autovacuum off) their estimates reach the
    JIT threshold for a few hundred rows: compiling cost 15-35 ms a statement at
    10,000,000 jobs, /metrics 440 ms instead of 166 on a loaded machine
    (bench/README.md@eb7c2f0, "Console pages"). Local to the transaction, so nothing is left in
    a session a pooler (PgBouncer, transaction mode) hands to another client."""
    reader = Reader(conn)
    reader.one(CQ.console_transaction_settings)
    return reader


def _rows(conn: Connection, query: Query, params: dict[str, Any]) -> list[Row]:
    sql = _checked(query).sql
    return [dict(r) for r in conn.exec_driver_sql(sql, params).mappings()]


def get_db() -> ConsoleDatabase:
    """The primary database of the console mounted in the current app: every action, and
    the reads that decide one (a pages' figures may come from a replica instead:
    jobwarden.console.web.reads.page_reads)."""
    db: ConsoleDatabase = current_app.extensions["jobwarden_db"]
    return db
