"""The console's database access: one SQLAlchemy Engine per app, named queries only."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flask import current_app
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import create_engine

from worker.db import database_url, sqlalchemy_url
from worker.queries import Q as RUNTIME_QUERIES
from worker.queries import Queries, load_queries


def _console_queries() -> Queries:
    """The console's own queries (console/sql) beside the runtime's; a name clash is an error."""
    own = load_queries(Path(__file__).parent / "sql")
    clash = sorted(set(own) & set(RUNTIME_QUERIES))
    if clash:
        raise RuntimeError(f"console/sql redefines runtime queries: {', '.join(clash)}")
    return Queries({**RUNTIME_QUERIES, **own})


#: Every query the console may run: `Q.console_jobs_page`, `Q["queue_controls_list"]`.
Q = _console_queries()


class ConsoleDatabase:
    """Runs named queries (console/sql and worker/sql); the console's only way to the database."""

    def __init__(self, url: str | None = None, pool_size: int = 5) -> None:
        self.url = url or database_url()
        self.engine = create_engine(
            sqlalchemy_url(self.url),
            pool_size=pool_size,
            max_overflow=5,
            pool_pre_ping=True,
            pool_recycle=1800,
            # Errors must not carry bound values (password hashes, reasons, keys) into logs.
            hide_parameters=True,
            # No server-side prepared statements: optional-filter queries must be planned
            # with their actual parameters, never with a generic plan.
            connect_args={"prepare_threshold": None, "application_name": "jobwarden-console"},
        )

    def where(self) -> str:
        """`host:port/dbname` of this database, for messages: never the user or password."""
        info = conninfo_to_dict(self.url)
        host = info.get("host") or "localhost"
        port = f":{info['port']}" if info.get("port") else ""
        return f"{host}{port}/{info.get('dbname') or info.get('user') or '?'}"

    def all(self, name: str, **params: Any) -> list[dict[str, Any]]:
        """Every row of query `name` as dicts (a short read-only transaction)."""
        with self.engine.connect() as conn:
            return rows(conn, name, params)

    def one(self, name: str, **params: Any) -> dict[str, Any] | None:
        found = self.all(name, **params)
        return found[0] if found else None

    @contextmanager
    def reading(self):
        """One connection for several reads that belong together (one page)."""
        with self.engine.connect() as conn:
            yield Reader(conn)

    @contextmanager
    def transaction(self):
        """A SQLAlchemy Connection in a transaction that commits on success."""
        with self.engine.begin() as conn:
            yield conn

    def dispose(self) -> None:
        self.engine.dispose()


class Reader:
    """Named reads on one open connection."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def all(self, name: str, **params: Any) -> list[dict[str, Any]]:
        return rows(self.conn, name, params)

    def one(self, name: str, **params: Any) -> dict[str, Any] | None:
        found = rows(self.conn, name, params)
        return found[0] if found else None


def rows(conn, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.exec_driver_sql(Q[name], params).mappings()]


def get_db() -> ConsoleDatabase:
    return current_app.extensions["jobwarden_db"]
