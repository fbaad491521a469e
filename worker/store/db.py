"""Where the database is: DATABASE_URL, or an embedded PostgreSQL under JOBWARDEN_HOME.

Every command resolves its URL here, so a newcomer without PostgreSQL gets a private
server (the `pgserver` package ships the binaries) and production sets DATABASE_URL.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from jobwarden.worker.core.dberrors import DB_UNREACHABLE
from jobwarden.worker.core.env import worker_settings
from jobwarden.worker.store.jobstore import JobStore, JsonbLoader
from jobwarden.worker.store.queries import Q

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger("jobwarden.db")

_embedded_url: str | None = None


def jobwarden_home() -> Path:
    return worker_settings().home.resolve()


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
    if url is not None:
        # Set but empty is refused too (parse_url): an unfilled `DATABASE_URL=${DB_URL}`
        # must not pass for unset and send every command to another database.
        return parse_url(url)
    return embedded_url()


#: The schemes a database URL may have, all read as libpq's `postgresql://`: libpq's
#: two, and SQLAlchemy's with a psycopg driver (a Flask-SQLAlchemy app's own setting).
URL_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2")

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_FORM = "postgresql://user:password@host:5432/dbname"


class DatabaseUrlError(ValueError):
    """A database URL that names no database to use, said in one line without its
    password. Raised before anything connects, so nothing is written anywhere."""


def normalize_url(url: str) -> str:
    """`url` as a libpq URL (postgresql://), or DatabaseUrlError (parse_url)."""
    return parse_url(url)


@functools.lru_cache(maxsize=32)
def parse_url(url: str, setting: str = "DATABASE_URL") -> str:
    """The libpq URL that `url` (the value of `setting`) means, or DatabaseUrlError saying
    in one line what is wrong with it.

    A URL is parsed here once (cached) and used as returned everywhere, so the worker,
    the console and Alembic (through `sqlalchemy_url`) all read the same database out of
    it, or none of them starts. Past its scheme, libpq's own parser reads it
    (psycopg.conninfo.conninfo_to_dict calls PQconninfoParse): the very rules the
    connection will apply, for percent-escapes, IPv6 hosts, several hosts and the query's
    parameters, where a parser of our own could accept what libpq then reads otherwise.
    Only the port, which libpq checks when it connects and SQLAlchemy reads as an int
    before that, is checked here besides. A key=value conninfo string is refused: the
    documented form is a URL, and Alembic's SQLAlchemy URL cannot carry one.
    """
    if not url:
        raise DatabaseUrlError(f"{setting} is empty: give a URL like {_FORM}, or unset "
                               "it to use the embedded PostgreSQL")
    if url != url.strip():
        raise DatabaseUrlError(f"{setting} has blanks or a line break around it")
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        raise DatabaseUrlError(f"{setting} is not a URL (no scheme://): give one like {_FORM}")
    if scheme not in URL_SCHEMES:
        raise DatabaseUrlError(f"{setting} has scheme {scheme!r}: use postgresql:// "
                               "(postgres:// and postgresql+psycopg:// are read alike)")
    libpq = "postgresql://" + rest
    try:
        parts = conninfo_to_dict(libpq)
    except psycopg.ProgrammingError as exc:
        reason = " ".join(str(exc).split())
        # libpq quotes the part it could not read, which may be the password itself.
        password = rest.split("/", 1)[0].split("?", 1)[0].rpartition("@")[0].partition(":")[2]
        if password:
            reason = reason.replace(password, "***")
        raise DatabaseUrlError(f"{setting} is not a valid PostgreSQL URL: {reason}") from None
    for port in str(parts.get("port") or "").split(","):
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise DatabaseUrlError(f"{setting} has port {port!r}: a port is a number from "
                                   "1 to 65535")
    return libpq


def sqlalchemy_url(url: str) -> str:
    """The same database as a SQLAlchemy URL using the psycopg 3 driver."""
    return "postgresql+psycopg://" + parse_url(url)[len("postgresql://"):]


def pooled() -> bool:
    """True when DATABASE_URL reaches PostgreSQL through a transaction-pooling pooler
    (`JOBWARDEN_POOLER=transaction`, e.g. PgBouncer's pool_mode = transaction)."""
    return worker_settings().pooler == "transaction"


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
    direct = worker_settings().listen_url
    if direct:
        return parse_url(direct, "JOBWARDEN_LISTEN_URL")
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

    A wheel carries it as jobwarden/worker/migrations (pyproject.toml's package-dir); the
    repository keeps it at its top level, where an editable install and a checkout find it.
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


class SchemaOutOfDate(RuntimeError):
    """The database has no Jobwarden tables, or tables older than this code: one line
    that says to run `jobwarden migrate`."""


_ASSIGNED = re.compile(r"^(revision|down_revision)\b[^=\n]*=(.*)$", re.MULTILINE)


@functools.cache
def code_revisions() -> dict[str, tuple[str, ...]]:
    """Each migration of this code: its revision -> the revisions it follows (none for
    the first). Read from the migration files' `revision = ` and `down_revision = ` lines,
    so a worker knows the schema it needs without importing Alembic and SQLAlchemy with
    it (tests/integration/test_schema_revision.py checks it reads them as Alembic does)."""
    parents: dict[str, tuple[str, ...]] = {}
    for path in sorted((migrations_dir() / "versions").glob("*.py")):
        found = {name: tuple(re.findall(r"[\"']([^\"']+)[\"']", value))
                 for name, value in _ASSIGNED.findall(path.read_text())}
        if len(found.get("revision", ())) != 1 or "down_revision" not in found:
            raise RuntimeError(f"migration {path.name} names no revision: reinstall jobwarden")
        parents[found["revision"][0]] = found["down_revision"]
    return parents


def code_heads() -> frozenset[str]:
    """The revisions `jobwarden migrate` brings a database to (one, but after a merge)."""
    parents = code_revisions()
    followed = {p for before in parents.values() for p in before}
    return frozenset(parents.keys() - followed)


def _with_ancestors(revisions: set[str] | frozenset[str]) -> set[str]:
    parents = code_revisions()
    seen: set[str] = set()
    todo = list(revisions)
    while todo:
        revision = todo.pop()
        if revision not in seen:
            seen.add(revision)
            todo.extend(parents.get(revision, ()))
    return seen


#: Jobwarden's own Alembic revision table (worker/store/sql/revisions.sql): the
#: application's own Alembic keeps Alembic's default one, alembic_version.
VERSION_TABLE = "jobwarden_alembic_version"


#: How often a `jobwarden migrate` tries again for the lock another one holds.
MIGRATE_LOCK_POLL_SECONDS = 0.2


@contextlib.contextmanager
def migration_lock(conn: Any) -> Iterator[None]:
    """Hold the migration lock on `conn` (SQLAlchemy's, in migrations/env.py) while the
    block migrates: of two `jobwarden migrate` at once, the second waits, then reads the
    revision the first wrote. Tried every MIGRATE_LOCK_POLL_SECONDS, each try a
    transaction of its own, so a waiting migrate holds no snapshot between tries
    (revisions.sql, migrate_lock). Behind a transaction pooler there is no session to
    hold it (its try and its release would run on any server connection, and one left
    holding it stops every later migrate): none is taken, and migrates run one at a
    time by hand (docs/guide/operating.md, "Behind PgBouncer")."""
    if pooled():
        yield
        return
    store = JobStore(conn)
    while not store.one(Q.migrate_lock)[0]:
        conn.commit()
        time.sleep(MIGRATE_LOCK_POLL_SECONDS)
    conn.commit()
    try:
        yield
    finally:
        store.rows(Q.migrate_unlock)
        conn.commit()


def adopt_revisions(store: JobStore) -> None:
    """Before `jobwarden migrate` reads the revision (under its lock, in its transaction):
    a database an earlier release migrated keeps Jobwarden's revision in alembic_version;
    that table becomes Jobwarden's own when it holds Jobwarden's revisions and nothing
    else; beside the application's, Jobwarden's alone move to a table of its own. Any
    other revision there is the application's, and stays where it is."""
    own, shared = store.one(Q.schema_versioned)
    if own or not shared:
        return
    held = {row[0] for row in store.rows(Q.shared_schema_revisions)}
    ours = held & code_revisions().keys()
    if held and held == ours:
        store.rows(Q.adopt_shared_revisions)
    elif ours:  # shared with the application's own revisions: Jobwarden's move alone
        store.rows(Q.create_revision_table)
        store.rows(Q.move_shared_revisions, {"ours": sorted(ours)})


def database_revisions(conn: psycopg.Connection) -> set[str]:
    """The Jobwarden revisions the database is at: its own table's, or, in a database an
    earlier release migrated and this one has not yet, those of alembic_version that are
    Jobwarden's (the application's own are not)."""
    store = JobStore(conn)
    own, shared = store.one(Q.schema_versioned)
    if own:
        return {row[0] for row in store.rows(Q.schema_revisions)}
    if shared:
        return {row[0] for row in store.rows(Q.shared_schema_revisions)} & code_revisions().keys()
    return set()


def check_schema(conn: psycopg.Connection) -> str | None:
    """Compare the database's migration revision with this code's, at a worker's, the
    console's or a command's start (never on a job's path: enqueue and claims send
    nothing more). Behind the code, or without Jobwarden's tables: SchemaOutOfDate, to be
    refused before anything is written (the old tables would take writes, or fail on a
    column they lack, mid-run). At a revision this code does not know, which a newer
    Jobwarden made: the line to warn with, and the caller goes on (a rolling upgrade
    migrates before every worker runs the new code). Current: None."""
    revisions = database_revisions(conn)
    if not revisions:
        raise SchemaOutOfDate("the database has no Jobwarden tables yet: run "
                              "`jobwarden migrate` first")
    heads = code_heads()
    ours = ", ".join(sorted(heads))
    theirs = ", ".join(sorted(revisions))
    if not revisions <= code_revisions().keys():
        return (f"the database is at revision {theirs}, which this Jobwarden ({ours}) does "
                "not know: a newer Jobwarden migrated it; upgrade it here too (until then, "
                "what changed may fail)")
    missing = len(_with_ancestors(heads) - _with_ancestors(revisions))
    if missing:
        raise SchemaOutOfDate(
            f"the database is at revision {theirs}, {missing} "
            f"migration{'s' if missing > 1 else ''} behind this Jobwarden ({ours}): run "
            "`jobwarden migrate` first")
    return None


def check_database_schema(url: str | None = None) -> str | None:
    """check_schema on a connection of its own to `url` (default: database_url())."""
    with connect(url, connect_timeout=10) as conn:
        return check_schema(conn)


#: A hot statement that handled this many times more rows than any before it on its
#: connection (and at least REPLAN_ROWS) has its session's plans made again.
REPLAN_FACTOR = 4
REPLAN_ROWS = 50
#: And so does any, once the session's plans are this many seconds old: the tables may
#: have grown under batches that stay small. A claim and an outcome batch planned again
#: cost a few milliseconds once in that time.
REPLAN_SECONDS = 30.0


class DedicatedConnection:
    """One autocommit connection kept by a hot duty (claims, batched outcomes): no pool
    checkout or liveness check per statement. After a database error the caller drops
    it, and the next use connects again. `options`: more psycopg connection options
    (an application_name)."""

    def __init__(self, url: str, **options: Any):
        self.url = url
        self._options = options
        self._conn: psycopg.Connection | None = None
        #: The most rows one hot statement handled on this connection so far.
        self._most_rows = 0
        #: When (time.monotonic()) the session's plans were last dropped, or it began.
        self._planned_at = 0.0
        #: Whether `handled` found the session's plans due to be made again (`replan`).
        self._replan_due = False
        #: The thread connecting ahead of the first use (`open_ahead`), until that use.
        self._ahead: threading.Thread | None = None

    def open_ahead(self) -> None:
        """Connect now, on a thread of its own; the first `get` (or `drop`) waits for it
        and takes the connection. So a worker's connections are made together while it
        registers, not one after another at their first use, each a round trip or more
        and a server process's start that a first beat, claim or finish waited for. A
        failure here is left for that first use, which connects again and meets it."""
        def connect() -> None:
            try:
                self._connected()
            except Exception:
                pass  # the first use connects again and meets it (docstring)

        self._ahead = threading.Thread(target=connect, name="connect-ahead", daemon=True)
        self._ahead.start()

    def _wait_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead.join()
            self._ahead = None

    def get(self) -> psycopg.Connection:
        self._wait_ahead()
        return self._connected()

    def _connected(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5,
                                         **connect_kwargs(), **self._options)
            # Claims carry every job's payload (jobstore.py, JsonbLoader says why).
            self._conn.adapters.register_loader("jsonb", JsonbLoader)
            self._most_rows = 0
            self._planned_at = time.monotonic()
            self._replan_due = False
        return self._conn

    def handled(self, rows: int) -> None:
        """A hot statement on this connection handled `rows` rows (a claim's jobs, an
        outcome batch). When that far outgrows every earlier one, or the session's plans
        are REPLAN_SECONDS old, they are due to be made again: `replan` drops them
        (Q.discard_plans), and the statements after it are planned anew. Nothing is sent
        here, so the caller's rows (a claim's jobs) wait for no round trip.

        The server keeps a prepared statement's generic plan, and PL/pgSQL a trigger's,
        for the whole session, sized by the tables as they were when it was made; with no
        statistics that is their size on disk then. A worker that started idle made them
        on a near-empty queue, and when a backlog came its claims joined 200 ids to the
        whole table by hash (a sequential scan of 40,000 rows, 33 ms of a 40 ms claim):
        it drained at 0.40x the rate of one started on the backlog (bench/README.md@eb7c2f0,
        2026-12-04). The claims probe the primary key for their rows since (claim_jobs),
        but a fair claim's young plan still reads the whole table for its update, and
        every plan's walk is sized for the table it was made on. The first large batch is
        the sign that the tables have grown; a worker whose batches stay small (slow jobs,
        a few slots) never gives it, and its plans are made again by their age."""
        if self._conn is None or self._conn.closed:
            return
        grew = rows >= REPLAN_ROWS and rows >= REPLAN_FACTOR * self._most_rows
        self._most_rows = max(self._most_rows, rows)
        if grew or time.monotonic() - self._planned_at >= REPLAN_SECONDS:
            self._replan_due = True

    @property
    def replan_due(self) -> bool:
        """Whether the session's plans wait to be dropped (`handled` found them due)."""
        return self._replan_due

    def replan(self, warm: Callable[[psycopg.Connection], object] | None = None) -> None:
        """Drop the session's plans if `handled` found them due; then `warm` runs on the
        connection, to make again at once the plan its next hot statement needs.

        Called where nobody waits (a producer before it waits for work, a completer after
        its batch is written). A claim planned anew, its trigger's statements with it,
        took 1.96-2.02 ms against 0.86-0.92 for one on plans made again ahead (an idle
        worker, one job a claim; bench/README.md@eb7c2f0, "Plans made again off the path of a
        job's start"): every REPLAN_SECONDS an idle worker's next job waited that much
        longer to start."""
        if not self._replan_due or self._conn is None or self._conn.closed:
            return
        self._replan_due = False
        try:
            JobStore(self._conn).rows(Q.discard_plans)
            if warm is not None:
                warm(self._conn)
        except DB_UNREACHABLE:
            # Never the caller's failure: the statement before went through, and what
            # it handled (claimed jobs, written outcomes) must not be taken for lost.
            # The next use connects again, with no plans kept.
            self.drop()
            return
        self._planned_at = time.monotonic()

    def drop(self) -> None:
        self._wait_ahead()
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass  # it is being thrown away because it failed
            self._conn = None
