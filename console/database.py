"""The console's database access: one SQLAlchemy Engine per app, named queries only."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from flask import current_app
from sqlalchemy import create_engine

from worker.db import database_url, sqlalchemy_url
from worker.queries import Q


class ConsoleDatabase:
    """Runs worker/sql's named queries; the only place the console touches the database."""

    def __init__(self, url: str | None = None, pool_size: int = 5) -> None:
        self.url = url or database_url()
        self.engine = create_engine(
            sqlalchemy_url(self.url),
            pool_size=pool_size,
            max_overflow=5,
            pool_pre_ping=True,
            pool_recycle=1800,
            # No server-side prepared statements: optional-filter queries must be planned
            # with their actual parameters, never with a generic plan.
            connect_args={"prepare_threshold": None, "application_name": "jobwarden-console"},
        )

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
