"""Shared fixtures: a private, freshly migrated database on a real PostgreSQL.

The server is DATABASE_URL's when set (CI uses the machine's PostgreSQL), or else the
embedded one. Each test session creates its own database, so parallel runs on one
server never see each other's jobs; each test starts from empty tables, and without the
tables that earlier tests made for themselves (race_log, invoices, ...).
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil
import psycopg
import pytest

from jobwarden import registry as default_registry_
from jobwarden.worker.store import db as dbmod
from jobwarden.worker.store.embedded import embedded_datadir, stop_embedded
from tests.helpers import HANDLER_KINDS, as_handler_kind
from tests.pgcluster import PrivateCluster, contrib_bin

# The console's fixtures (app, client, signed-in users…), for the integration and browser
# tiers. Declared here: pytest accepts pytest_plugins only in the top-level conftest.
pytest_plugins = ["tests.console_support"]

#: Every table a test may write to (test_console_replica.py empties its own clusters'
#: with it; clean_db finds the ones written instead, below).
TABLES = (
    "job_audit", "job_executions", "processed_effects", "background_jobs",
    "job_workers", "console_users", "queue_controls", "job_types", "console_login_throttle",
    "job_schedules", "job_event_totals",
    "console_selections", "console_selection_jobs", "console_bulk_steps",
    "job_rate_buckets", "job_limit_controls", "job_batches", "job_type_versions",
    "job_notify_targets", "job_notify_groups", "job_notifications",
)


#: The tables the migrations made in each session database, by URL: clean_db drops the rest.
_MIGRATED: dict[str, frozenset[str]] = {}


def _public_tables(conn) -> frozenset[str]:
    return frozenset(r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))


def _never_autovacuumed(url: str) -> None:
    """Autovacuum off for each of the database's tables, as it is on the shared server.
    The embedded server (and a private cluster at its defaults) runs it, and a VACUUM
    that came just after a test's TRUNCATE, its statistics not yet told of it, left
    reltuples 0 where the next test must find a table never analyzed (-1):
    test_clean_db.py failed on it, and the plan tests read those statistics."""
    with psycopg.connect(url, autocommit=True) as conn:
        for (table,) in conn.execute(
                "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r'").fetchall():
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")


def _with_dbname(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def pytest_terminal_summary(terminalreporter, config):
    # pytest-randomly prints its seed in the header, which -q hides: say it again by the
    # result, where a failure that depends on the order is read.
    seed = getattr(config.option, "randomly_seed", None)
    if config.pluginmanager.hasplugin("randomly") and isinstance(seed, int):
        terminalreporter.write_line(f"random order: replay it with "
                                    f"--randomly-seed={seed}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # A test process under xdist sends each report to the controller as UTF-8, which a
    # lone surrogate (a handler that logged undecodable bytes, as the attempt-log tests
    # do on purpose) cannot be: the whole run then stops with an internal error. Such
    # characters are shown escaped instead, in the captured output and log.
    outcome = yield
    report = outcome.get_result()
    report.sections = [(title, _printable(text)) for title, text in report.sections]


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _embedded_running(home) -> bool:
    pidfile = embedded_datadir(home) / "postmaster.pid"
    try:
        os.kill(int(pidfile.read_text().split()[0]), 0)
    except (OSError, ValueError, IndexError):
        return False  # no pid file, or a stale one
    return True


#: Whether the controller started the embedded server (and so stops it at the end).
_STARTED_EMBEDDED = pytest.StashKey[bool]()


def _shares_the_run(config) -> bool:
    """Whether this process runs tests beside others (pytest-xdist's `-n N`, N > 0), as
    their controller or as one of them."""
    return hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", 0))


def pytest_configure(config):
    # Under xdist the embedded server is the controller's to start and stop: a test
    # process that stopped it when its own tests ended would cut off the others'.
    if os.environ.get("DATABASE_URL") or hasattr(config, "workerinput"):
        return
    if _shares_the_run(config):
        home = dbmod.jobwarden_home()
        config.stash[_STARTED_EMBEDDED] = not _embedded_running(home)
        dbmod.database_url()


def pytest_unconfigure(config):
    if config.stash.get(_STARTED_EMBEDDED, False):
        stop_embedded(dbmod.jobwarden_home())


@pytest.fixture(scope="session")
def server_url(pytestconfig):
    if os.environ.get("DATABASE_URL") or _shares_the_run(pytestconfig):
        yield dbmod.database_url()  # the controller started it (pytest_configure)
        return
    # The embedded server of this checkout (./.jobwarden). One that was running already
    # (`make demo` leaves it running) stays as it was; one the suite started is stopped
    # afterwards, so a test run leaves no process behind.
    home = dbmod.jobwarden_home()
    was_running = _embedded_running(home)
    yield dbmod.database_url()
    if not was_running:
        stop_embedded(home)


@pytest.fixture(scope="session")
def database_url(server_url):
    """URL of a new database, migrated to head, dropped after the session."""
    name = f"jobwarden_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = _with_dbname(server_url, name)
    dbmod.migrate(url)
    _never_autovacuumed(url)
    with psycopg.connect(url) as conn:  # now, before any test has added a table of its own
        _MIGRATED[url] = _public_tables(conn)
    old = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = url  # subprocesses (workers, CLI) inherit it
    yield url
    if old is None:
        os.environ.pop("DATABASE_URL", None)
    else:
        os.environ["DATABASE_URL"] = old
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def _new_empty_database(server_url: str, template: str | None = None) -> Iterator[str]:
    name = f"jobwarden_empty_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'
                      + (f' TEMPLATE "{template}"' if template else ""))
    try:
        yield _with_dbname(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _is_worker(cmdline: list[str]) -> bool:
    """A `jobwarden worker` process, by its command line (`-m jobwarden.worker.cli` or the
    console script); not the embedded server, whose data directory is under .jobwarden."""
    return "worker" in cmdline and any(
        arg == "jobwarden.worker.cli" or os.path.basename(arg) == "jobwarden" for arg in cmdline)


@pytest.fixture(autouse=True)
def _no_worker_outlives_its_test():
    """A worker a test started and left running would claim the jobs of the tests after
    it, which then fail far from the cause: such a worker is killed and its test errors."""
    yield
    left = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and _is_worker(proc.cmdline()):
                left.append(proc)
        except psutil.Error:  # gone meanwhile
            continue
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(left, timeout=10)
    if left:
        pytest.fail("a worker outlived its test: " + "; ".join(
            f"pid {p.pid}" for p in left), pytrace=False)


@pytest.fixture
def empty_database(server_url):
    """URL of a new database with no tables at all (not migrated), dropped afterwards."""
    with _new_empty_database(server_url) as url:
        yield url


@pytest.fixture
def second_empty_database(server_url):
    """Another, for a test that compares two databases built two ways."""
    with _new_empty_database(server_url) as url:
        yield url


@pytest.fixture(scope="session")
def _migrated_template(server_url):
    """The name of a database migrated to head once a session, for migrated_database to
    copy; nothing else connects to it (a copy needs it idle)."""
    with _new_empty_database(server_url) as url:
        dbmod.migrate(url)
        yield urlsplit(url).path.lstrip("/")


@pytest.fixture
def migrated_database(server_url, _migrated_template):
    """URL of a new database of its own, migrated to head, dropped afterwards: a copy of
    one migrated once a session (a migration took 1-2 s; a copy, a tenth of that), for a
    test that needs statistics or settings no other test touched."""
    with _new_empty_database(server_url, template=_migrated_template) as url:
        yield url


#: The migrated tables a test may have written to: those with a block (an insert extends
#: the table, even one deleted or rolled back later; TRUNCATE leaves it without any) or
#: that were vacuumed or analyzed since their last TRUNCATE (which sets reltuples to -1).
#: A table neither is true of is as TRUNCATE would leave it.
_WRITTEN = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r'
  AND c.relname NOT IN ('alembic_version', 'jobwarden_alembic_version')
  AND c.relname = ANY(%s)
  AND (pg_relation_size(c.oid) > 0 OR c.reltuples <> -1 OR c.relpages <> 0)
"""

#: What a table's TRUNCATE trigger empties: background_jobs' (jobwarden_rollup_truncate)
#: the rollups, job_audit's (migration 0078) the audit lines.
_EMPTIED_BY_TRIGGER = {"background_jobs": frozenset({"job_count_deltas", "job_minute_counts"}),
                       "job_audit": frozenset({"job_audit_lines"})}

#: Each foreign key's table and the table it references, in the public schema.
_REFERENCES = """
SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c
JOIN pg_namespace n ON n.oid = c.connamespace
WHERE c.contype = 'f' AND n.nspname = 'public'
"""


def _cascaded(conn, tables: set[str]) -> set[str]:
    """`tables` and every table TRUNCATE ... CASCADE of them also empties: those that
    reference one of them, transitively."""
    edges = conn.execute(_REFERENCES).fetchall()
    reached = set(tables)
    while grown := {child for child, parent in edges
                    if parent in reached and child not in reached}:
        reached |= grown
    return reached


def _emptied(database_url: str) -> str:
    """`database_url`'s database with every table emptied, and none but the migrated ones.

    Only the tables a test wrote to are truncated: TRUNCATE gives each table, index and
    TOAST table new files, and doing so for every table cost 0.3-0.8 s a test on the
    embedded server, more than most tests themselves."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        # A test's own tables would otherwise meet the next test that creates one of the
        # same name (several create race_log), which then fails or depends on the order.
        extra = sorted(_public_tables(conn) - _MIGRATED[database_url])
        if extra:
            conn.execute("DROP TABLE " + ", ".join(f'"{t}"' for t in extra) + " CASCADE")
        written = {r[0] for r in conn.execute(_WRITTEN, [sorted(_MIGRATED[database_url])])}
        # A TRUNCATE trigger empties its tables, and cannot while the statement that
        # fired it names them too: so they are left out when the statement reaches the
        # trigger's table, named or through CASCADE (job_audit references
        # background_jobs: a test that wrote audit lines and jobs, but no audit row,
        # reaches job_audit's trigger that way).
        reached = _cascaded(conn, written)
        for table, emptied in _EMPTIED_BY_TRIGGER.items():
            if table in reached:
                written -= emptied
        # A statement an earlier test left running (a console thread's /metrics scrape
        # over job_executions_all, which locks the history's partitions and then
        # background_jobs) can meet the TRUNCATE's locks, taken in another order, in a
        # deadlock, which the server breaks by failing one side: this one, then tried
        # again once that statement has its locks and ends.
        for attempt in range(5):
            try:
                with conn.transaction():
                    _truncate(conn, written)
                break
            except psycopg.errors.DeadlockDetected:
                if attempt == 4:
                    raise
    return database_url


def _truncate(conn, written: set[str]) -> None:
    if written:
        # CASCADE also empties the tables that reference these.
        conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in sorted(written))
                     + " RESTART IDENTITY CASCADE")
    # Every sequence from its start, also one whose table stayed empty (a failed insert
    # takes a value too) and the rollup deltas' ids, which background_jobs' trigger does
    # not restart: the rollup folds when they cross a multiple of 2000, so a test must
    # not depend on how many deltas earlier tests wrote.
    conn.execute("SELECT setval(format('%I.%I', schemaname, sequencename), "
                 "start_value, false) FROM pg_sequences "
                 "WHERE schemaname = 'public' AND last_value IS NOT NULL")


@pytest.fixture
def clean_db(database_url):
    """The test database with every table emptied, and none but the migrated ones."""
    return _emptied(database_url)


def _loads_auto_explain(url: str) -> bool:
    with psycopg.connect(url) as conn:
        try:
            conn.execute("LOAD 'auto_explain'")
        except psycopg.Error:
            return False
    return True


@pytest.fixture(scope="session")
def _explain_url(server_url, database_url):
    """The session database when its server has auto_explain; else a database on a private
    cluster of the machine's PostgreSQL: the embedded server ships no contrib modules, and
    the plan tests read the plans of trigger statements, which only auto_explain reports."""
    if _loads_auto_explain(database_url):
        yield database_url
        return
    bin_dir = contrib_bin()
    if bin_dir is None:
        pytest.fail("the plan tests need auto_explain, which the embedded PostgreSQL lacks: "
                    "install a PostgreSQL server package (`make test` installs Debian's)")
    cluster = PrivateCluster(bin_dir)
    try:
        cluster.start()
        dbmod.migrate(cluster.url)
        _never_autovacuumed(cluster.url)
        with psycopg.connect(cluster.url) as conn:
            _MIGRATED[cluster.url] = _public_tables(conn)
        yield cluster.url
    finally:
        cluster.destroy()


@pytest.fixture
def explain_db(_explain_url):
    """A clean, migrated database whose sessions can LOAD 'auto_explain'."""
    return _emptied(_explain_url)


@pytest.fixture
def conn(clean_db):
    """A psycopg connection (autocommit off) to the clean test database."""
    with psycopg.connect(clean_db) as c:
        yield c


@pytest.fixture
def default_registry():
    """The process-wide registry (`jobwarden.worker.jobs.registry`, the one `@job` fills), empty for one
    test and given back its types afterwards: a module imported earlier keeps what it
    declared (the example shop enqueues through it), as it would in a real process."""
    saved = list(default_registry_)
    default_registry_.clear()
    yield default_registry_
    default_registry_.clear()
    for job_type in saved:
        default_registry_.register(job_type)


@pytest.fixture(params=HANDLER_KINDS)
def handler_kind(request):
    """Each handler kind in turn (thread, coroutine), as a decorator to put under `@job`:
    the guarantees a test checks hold for both."""
    return as_handler_kind(request.param)


SHOP = Path(__file__).resolve().parents[1] / "examples" / "shop"


@pytest.fixture
def shop_package(default_registry):
    """The example shop (examples/shop) imported afresh into an empty default registry.

    The shop declares its job types with `@job` at import, into the process-wide registry.
    Another test may have filled that registry with types of the same names (the demo's
    `charge_card`, `sync_crm`), and an import that failed half-way leaves its first types
    behind; either way the shop's import would meet "already registered". So the shop's
    modules are forgotten before and after, and `default_registry` gives back what was
    there."""
    def forget() -> None:
        for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
            del sys.modules[name]

    if str(SHOP) not in sys.path:
        sys.path.insert(0, str(SHOP))
    forget()
    import shop
    yield shop
    forget()
