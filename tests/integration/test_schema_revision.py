"""The worker, the console and the CLI compare the database's migration revision with
their own at start: a database behind the code (by one migration or many) is refused in
one line that says to run `jobwarden migrate`, before anything is written; a database a
newer Jobwarden migrated is used, with one line saying so."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from alembic.script import ScriptDirectory

from jobwarden.console import create_app
from jobwarden.worker.store import db as dbmod
from tests.helpers import scalar, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: A revision no Jobwarden has: the database looks migrated by a newer one.
NEWER = "9999"


def alembic_chain() -> list[str]:
    """The code's migrations, first to head, as Alembic itself reads them."""
    script = ScriptDirectory.from_config(dbmod.alembic_config("postgresql://x@h/db"))
    return [s.revision for s in reversed(list(script.walk_revisions()))]


CHAIN = alembic_chain()
HEAD = CHAIN[-1]


def test_the_code_knows_its_revisions_as_alembic_does():
    parents = dbmod.code_revisions()
    assert set(parents) == set(CHAIN)
    assert dbmod.code_heads() == frozenset({HEAD})
    assert [parents[r] for r in CHAIN] == [(), *((r,) for r in CHAIN[:-1])]


@pytest.fixture(scope="module")
def databases(server_url):
    """Databases one migration behind the code, far behind it, ahead of it (stamped with
    a revision no Jobwarden has), and at head; dropped afterwards."""
    made = {}
    with psycopg.connect(server_url, autocommit=True) as admin:
        for state, revision in (("behind", CHAIN[-2]), ("far behind", CHAIN[len(CHAIN) // 2]),
                                ("newer", HEAD), ("current", HEAD)):
            name = f"jobwarden_rev_{uuid.uuid4().hex[:8]}"
            admin.execute(f'CREATE DATABASE "{name}"')
            url = with_dbname(server_url, name)
            dbmod.migrate(url, revision)
            made[state] = url
    with psycopg.connect(made["newer"], autocommit=True) as conn:
        conn.execute("UPDATE jobwarden_alembic_version SET version_num = %s", (NEWER,))
    yield made
    with psycopg.connect(server_url, autocommit=True) as admin:
        for url in made.values():
            name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def with_dbname(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def jobwarden(url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, DATABASE_URL=url)
    try:
        return subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING",
                               *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # a worker or console that went on running
        pytest.fail(f"jobwarden {' '.join(args)} ran on: {exc.stderr!r}")


def rows(url: str, table: str) -> int:
    return scalar(url, f"SELECT count(*) FROM {table}")


BEHIND = pytest.mark.parametrize("state", ["behind", "far behind"])
REFUSAL = re.compile(r"^jobwarden: the database is at revision \w+, \d+ migrations? behind "
                     r"this Jobwarden \(\w+\): run `jobwarden migrate` first\n$")


@BEHIND
def test_a_worker_on_a_database_behind_the_code_refuses_to_start_and_writes_nothing(
        databases, state):
    url = databases[state]
    types = rows(url, "job_types")
    result = jobwarden(url, "worker", "--app", "jobwarden.worker.demo_jobs")
    assert result.returncode == 1, result.stderr
    assert REFUSAL.match(result.stderr), result.stderr
    assert rows(url, "job_workers") == 0 and rows(url, "job_types") == types


@BEHIND
@pytest.mark.parametrize("command", [["stats"], ["enqueue", "send_email", "--payload", "{}"],
                                     ["queue", "list"], ["recover"]])
def test_the_cli_on_a_database_behind_the_code_refuses_and_writes_nothing(
        databases, state, command):
    url = databases[state]
    result = jobwarden(url, *command)
    assert result.returncode == 1, result.stderr
    assert REFUSAL.match(result.stderr), result.stderr
    assert rows(url, "background_jobs") == 0


@BEHIND
def test_the_console_on_a_database_behind_the_code_refuses_to_start(databases, state):
    result = jobwarden(databases[state], "console", "--port", "0")
    assert result.returncode == 1, result.stderr
    assert REFUSAL.match(result.stderr), result.stderr
    with pytest.raises(dbmod.SchemaOutOfDate, match="run `jobwarden migrate` first"):
        create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": databases[state]})


def test_the_refusal_names_how_far_behind_the_database_is(databases):
    result = jobwarden(databases["behind"], "stats")
    assert f"at revision {CHAIN[-2]}, 1 migration behind this Jobwarden ({HEAD})" \
        in result.stderr
    far = CHAIN[len(CHAIN) // 2]
    result = jobwarden(databases["far behind"], "stats")
    assert (f"at revision {far}, {len(CHAIN) - 1 - CHAIN.index(far)} migrations behind"
            in result.stderr)


NEWER_LINE = (f"the database is at revision {NEWER}, which this Jobwarden ({HEAD}) does not "
              "know: a newer Jobwarden migrated it")


def test_the_cli_on_a_database_a_newer_jobwarden_migrated_says_so_and_goes_on(databases):
    result = jobwarden(databases["newer"], "enqueue", "send_email", "--payload", "{}")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("\n") == 1 and NEWER_LINE in result.stderr, result.stderr
    assert rows(databases["newer"], "background_jobs") == 1


def test_a_worker_on_a_database_a_newer_jobwarden_migrated_says_so_and_runs(databases):
    url = databases["newer"]
    worker = subprocess.Popen([sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING",
                               "worker", "--app", "jobwarden.worker.demo_jobs"], cwd=ROOT,
                              env=dict(os.environ, DATABASE_URL=url),
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: rows(url, "job_workers"), timeout=60, message="the worker to register")
        worker.send_signal(signal.SIGTERM)
        err = worker.communicate(timeout=60)[1]
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    assert err.count("\n") == 1 and NEWER_LINE in err, err


def test_the_console_on_a_database_a_newer_jobwarden_migrated_says_so_and_serves(
        databases, caplog):
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": databases["newer"]})
    try:
        assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
            NEWER_LINE + "; upgrade it here too (until then, what changed may fail)"]
        assert app.test_client().get("/login").status_code == 200
    finally:
        app.extensions["jobwarden_db"].dispose()


def test_a_current_database_passes_without_a_word_and_migrate_makes_one_current(
        databases, empty_database):
    result = jobwarden(databases["current"], "stats", "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    url = empty_database
    dbmod.migrate(url, CHAIN[-2])
    assert jobwarden(url, "stats").returncode == 1
    assert jobwarden(url, "migrate").returncode == 0
    result = jobwarden(url, "stats", "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr
