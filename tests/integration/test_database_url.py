"""A DATABASE_URL that names no usable database is refused by every command with one line
saying what is wrong, before anything connects: nothing is written anywhere, neither in
the database libpq's defaults (PGHOST, PGDATABASE...) reach nor in an embedded server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from jobwarden.worker.store import db as dbmod
from jobwarden.worker.store.embedded import embedded_datadir
from tests.helpers import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: (DATABASE_URL, what the one line must say about it)
BAD_URLS = [
    pytest.param("", "DATABASE_URL is empty", id="empty"),
    pytest.param("notaurl", "DATABASE_URL is not a URL", id="no-scheme"),
    pytest.param("mysql://app@db/app", "scheme 'mysql'", id="bad-scheme"),
    pytest.param("postgresq://postgres@127.0.0.1:5432/postgres", "scheme 'postgresq'",
                 id="typod-scheme"),
    pytest.param("postgresql://postgres@127.0.0.1:abc/postgres", "port 'abc'", id="bad-port"),
    pytest.param("postgresql://postgres@127.0.0.1:99999/postgres", "port '99999'",
                 id="port-out-of-range"),
    pytest.param("postgresql://app:s3cr3t%zz@db/app", "invalid percent-encoded token",
                 id="bad-escape"),
    pytest.param("postgresql://app:s3cr3t@db/app?sslmod=require", 'parameter: "sslmod"',
                 id="unknown-parameter"),
]

COMMANDS = {
    "migrate": ["migrate"],
    "stats": ["stats"],
    "enqueue": ["enqueue", "send_email", "--payload", "{}"],
    "worker": ["worker", "--app", "jobwarden.worker.demo_jobs"],
    "console": ["console", "--port", "0"],
}


def public_tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


@pytest.fixture
def defaults_reach(empty_database, tmp_path):
    """An environment whose libpq defaults (PG*) reach a new, empty database, and whose
    JOBWARDEN_HOME is new: a command that fell back on either would write there."""
    parts = conninfo_to_dict(empty_database)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(JOBWARDEN_HOME=str(tmp_path), PGHOST=parts.get("host", ""),
               PGPORT=parts.get("port", "5432"), PGUSER=parts.get("user", ""),
               PGDATABASE=parts["dbname"])
    yield env
    # Only if a command started one (it must not). pg_ctl cannot reach a data directory
    # under pytest's private tmp folder as the `pgserver` user: stop the postmaster itself.
    pidfile = embedded_datadir(tmp_path) / "postmaster.pid"
    if pidfile.is_file():
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
        wait_for(lambda: not pidfile.exists(), timeout=60)


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(("url", "says"), BAD_URLS)
def test_a_malformed_database_url_is_one_line_and_writes_nothing(
        defaults_reach, empty_database, server_url, tmp_path, url, says, command):
    server_tables = public_tables(server_url)
    env = dict(defaults_reach, DATABASE_URL=url)
    try:
        result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", *COMMANDS[command]],
                                cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=30)
    except subprocess.TimeoutExpired as exc:  # a worker retrying, a console serving
        pytest.fail(f"{command} ran on with DATABASE_URL={url!r}: {exc.stderr!r}")
    assert result.returncode != 0, result.stdout
    assert result.stderr.count("\n") == 1, result.stderr
    assert says in result.stderr, result.stderr
    assert "s3cr3t" not in result.stderr  # a password is never echoed
    # Nothing was made: not in the database libpq's defaults reach, not in the server's
    # own, and no embedded server was started in its place.
    assert public_tables(empty_database) == set()
    assert public_tables(server_url) == server_tables
    assert not embedded_datadir(tmp_path).exists()


@pytest.mark.parametrize(("url", "says"), BAD_URLS)
def test_a_malformed_url_raises_a_value_error_naming_what_is_wrong(url, says):
    with pytest.raises(dbmod.DatabaseUrlError, match=says.replace("'", ".")) as caught:
        dbmod.parse_url(url)
    assert "\n" not in str(caught.value) and "s3cr3t" not in str(caught.value)


@pytest.mark.parametrize(("url", "libpq"), [
    ("postgresql://app@db:5432/app", "postgresql://app@db:5432/app"),
    ("postgres://app@db/app", "postgresql://app@db/app"),
    ("postgresql+psycopg://app:pw@db/app", "postgresql://app:pw@db/app"),
    ("postgresql+psycopg2://app@db/app?sslmode=require",
     "postgresql://app@db/app?sslmode=require"),
    ("postgresql://postgres:@/postgres?host=/tmp/x", "postgresql://postgres:@/postgres?host=/tmp/x"),
    ("postgresql://h1:5432,h2:5433/app", "postgresql://h1:5432,h2:5433/app"),
])
def test_the_documented_url_forms_are_accepted_as_one_libpq_url(url, libpq):
    assert dbmod.parse_url(url) == libpq
    assert dbmod.sqlalchemy_url(url) == "postgresql+psycopg://" + libpq.removeprefix(
        "postgresql://")


def test_a_bad_listen_url_is_refused_naming_its_own_setting(monkeypatch):
    monkeypatch.setenv("JOBWARDEN_LISTEN_URL", "postgress://app@db/app")
    with pytest.raises(dbmod.DatabaseUrlError, match="JOBWARDEN_LISTEN_URL has scheme"):
        dbmod.listen_url("postgresql://app@pooler/app")
