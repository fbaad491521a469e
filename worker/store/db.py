"""Where the database is: DATABASE_URL, or an embedded PostgreSQL under JOBWARDEN_HOME.

Every command resolves its URL here, so a newcomer without PostgreSQL gets a private
server (the `pgserver` package ships the binaries) and production sets DATABASE_URL.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger("jobwarden.db")

_embedded_url: str | None = None


def jobwarden_home() -> Path:
    return Path(os.environ.get("JOBWARDEN_HOME", ".jobwarden")).resolve()


def embedded_url() -> str:
    """Start (or reuse) the embedded server and return its libpq URL."""
    global _embedded_url
    if _embedded_url is None:
        datadir = jobwarden_home() / "pgdata"
        datadir.mkdir(parents=True, exist_ok=True)
        # cleanup_mode=None leaves the server running for the next command to reuse.
        with warnings.catch_warnings():  # platformdirs complains when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            # only when the embedded server is used: production never loads it
            from pgserver.postgres_server import get_server

            server = get_server(datadir, cleanup_mode=None)
        _embedded_url = server.get_uri()
        log.info("using embedded PostgreSQL in %s", datadir, extra={"action": "embedded_db"})
    return _embedded_url


def database_url() -> str:
    """The libpq URL of the database every part of Jobwarden talks to."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return normalize_url(url)
    return embedded_url()


def normalize_url(url: str) -> str:
    """Accept SQLAlchemy-style URLs too (postgresql+psycopg://) and return a libpq one."""
    for prefix in ("postgresql+psycopg://", "postgresql+psycopg2://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix):]
    return url


def sqlalchemy_url(url: str) -> str:
    """The same database as a SQLAlchemy URL using the psycopg 3 driver."""
    url = normalize_url(url)
    return "postgresql+psycopg://" + url[len("postgresql://"):]


def pooled() -> bool:
    """True when DATABASE_URL reaches PostgreSQL through a transaction-pooling pooler
    (`JOBWARDEN_POOLER=transaction`, e.g. PgBouncer's pool_mode = transaction)."""
    value = (os.environ.get("JOBWARDEN_POOLER") or "").strip().lower()
    if value not in ("", "none", "transaction"):
        raise ValueError(f"JOBWARDEN_POOLER={value!r}: use 'transaction' or leave it unset")
    return value == "transaction"


def connect_kwargs() -> dict[str, Any]:
    """psycopg connection options every runtime connection takes.

    Through a transaction pooler consecutive transactions may run on different server
    connections, so nothing may live in the session: psycopg's server-side prepared
    statements (made after `prepare_threshold` runs of a query) are turned off.
    PgBouncer before 1.21 cannot carry them (Debian bookworm ships 1.18).
    """
    return {"prepare_threshold": None} if pooled() else {}


def listen_url(url: str) -> str | None:
    """Where LISTEN connects: JOBWARDEN_LISTEN_URL (a direct connection, past the pooler),
    else `url` itself; None through a transaction pooler without one (a LISTEN there
    would be lost between transactions), and the workers wake by polling alone."""
    direct = os.environ.get("JOBWARDEN_LISTEN_URL")
    if direct:
        return normalize_url(direct)
    return None if pooled() else url


def connect(url: str | None = None, **kwargs: Any) -> psycopg.Connection:
    """A new psycopg connection (autocommit off unless asked)."""
    return psycopg.connect(url or database_url(), **{**connect_kwargs(), **kwargs})


def migrate(url: str | None = None, revision: str = "head") -> None:
    """Apply Alembic migrations up to `revision`."""
    # Alembic (and SQLAlchemy with it) only when migrating: a worker process never loads it.
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str | None = None, revision: str = "base") -> None:
    from alembic import command  # only when migrating, as in migrate()

    command.downgrade(alembic_config(url), revision)


def migrations_dir() -> Path:
    """The Alembic environment, installed or in the source tree.

    A wheel carries it as worker/migrations (pyproject.toml's force-include); the
    repository keeps it at its top level, where an editable install finds it.
    """
    package = Path(__file__).resolve().parent.parent  # worker/, this module is worker/store/
    for candidate in (package / "migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise RuntimeError("Jobwarden's migrations/ folder is missing: reinstall jobwarden")


def alembic_config(url: str | None = None) -> Config:
    """Alembic settings built in code, so an installed package needs no alembic.ini."""
    from alembic.config import Config  # only when migrating, as in migrate()

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("path_separator", "os")
    cfg.attributes["url"] = sqlalchemy_url(url or database_url())
    # Upgrades and downgrades compare nothing: migrations/env.py then leaves the console's
    # table declarations unloaded (autogenerate, from alembic.ini, loads them).
    cfg.attributes["upgrade_only"] = True
    return cfg


class DedicatedConnection:
    """One autocommit connection kept by a hot duty (claims, batched outcomes): no pool
    checkout or liveness check per statement. After a database error the caller drops
    it, and the next use connects again. `options`: more psycopg connection options
    (an application_name)."""

    def __init__(self, url: str, **options: Any):
        self.url = url
        self._options = options
        self._conn: psycopg.Connection | None = None

    def get(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5,
                                         **connect_kwargs(), **self._options)
        return self._conn

    def drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass  # it is being thrown away because it failed
            self._conn = None
