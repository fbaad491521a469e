"""Through PgBouncer in transaction pooling mode: nothing may live in the session.

A private pgbouncer (tests/pgbouncer.py) forwards to the test server. Consecutive
transactions of one client may run on different server connections, so server-side
prepared statements break unless turned off (JOBWARDEN_POOLER=transaction), and LISTEN
needs a direct connection (JOBWARDEN_LISTEN_URL) or the workers poll.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psycopg
import pytest

from jobwarden import JobSpec, enqueue, enqueue_many
from jobwarden.console import create_app
from jobwarden.worker.store.db import connect, listen_url
from tests.console_support import login
from tests.helpers import scalar, start_process, status_counts, stop_processes, wait_for
from tests.pgbouncer import pgbouncer, via

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def jobwarden_with(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", *args],
                          cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def bouncer_port(database_url):
    with pgbouncer(database_url, pool_size=4) as port:
        yield port


@pytest.fixture
def pooled_url(clean_db, bouncer_port, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_POOLER", "transaction")
    monkeypatch.delenv("JOBWARDEN_LISTEN_URL", raising=False)
    return via(clean_db, bouncer_port)


def enqueue_while_another_client_holds_a_server(url: str, **kwargs) -> list[int]:
    """Enqueue 6 jobs on one client (psycopg prepares a statement from the 5th run on),
    then once more while a second client holds the server connection the first used:
    PgBouncer hands the first client another one."""
    ids = []
    with psycopg.connect(url, **kwargs) as conn, psycopg.connect(url) as other:
        for n in range(6):
            ids.append(enqueue(conn, "mail", {"n": n}, queue="email"))
            conn.commit()
        with other.transaction():
            other.execute("SELECT 1")  # now holds the server connection conn just used
            ids.append(enqueue(conn, "mail", {"n": 6}, queue="email"))
            conn.commit()
    return ids


def test_without_turning_prepared_statements_off_a_pooled_client_fails(pooled_url):
    # the failure the setting prevents: psycopg's default prepare_threshold is 5
    with pytest.raises(psycopg.errors.InvalidSqlStatementName, match="does not exist"):
        enqueue_while_another_client_holds_a_server(pooled_url)


def test_runtime_connections_through_the_pooler_hold_no_session_state(pooled_url, clean_db):
    with connect(pooled_url) as conn:  # jobwarden.worker.store.db.connect: prepare_threshold=None pooled
        assert conn.prepare_threshold is None
    ids = enqueue_while_another_client_holds_a_server(pooled_url, prepare_threshold=None)
    with psycopg.connect(clean_db) as direct:
        assert direct.execute("SELECT count(*) FROM background_jobs WHERE id = ANY(%s)",
                              [ids]).fetchone()[0] == 7


def test_listen_goes_direct_or_not_at_all_behind_a_pooler(pooled_url, monkeypatch, clean_db):
    assert listen_url(pooled_url) is None  # no LISTEN through the pooler: polling only
    monkeypatch.setenv("JOBWARDEN_LISTEN_URL", clean_db)
    assert listen_url(pooled_url) == clean_db
    monkeypatch.delenv("JOBWARDEN_POOLER")
    monkeypatch.delenv("JOBWARDEN_LISTEN_URL")
    assert listen_url(clean_db) == clean_db  # without a pooler: the same URL


def test_the_command_line_works_through_the_pooler(pooled_url, clean_db):
    env = {"DATABASE_URL": pooled_url}  # JOBWARDEN_POOLER is set by the fixture
    for args in (["migrate"], ["enqueue", "mail", "--payload", "{}", "--queue", "email"],
                 ["queue", "pause", "--all", "--reason", "restore"],
                 ["queue", "resume", "--all", "--reason", "done"], ["stats", "--json"]):
        result = jobwarden_with(env, *args)
        assert result.returncode == 0, (args, result.stderr)
    with psycopg.connect(clean_db) as direct:
        assert direct.execute("SELECT count(*) FROM job_audit").fetchone()[0] == 2


def test_migrate_through_the_pooler_takes_no_session_lock(pooled_url, clean_db):
    """Behind a transaction pooler migrate takes no session lock: its try and its
    release run in two transactions, on whichever server connections the pooler picks,
    and a lock left held by one (as a server connection the pooler keeps holds it here)
    stopped every later migrate, which waited for it for good."""
    with psycopg.connect(clean_db) as holder:  # a server connection left holding it
        holder.execute("SELECT pg_advisory_lock(hashtext('jobwarden.migrate'))")
        for _ in range(2):
            try:
                result = subprocess.run(
                    [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING",
                     "migrate"], cwd=ROOT, env={**os.environ, "DATABASE_URL": pooled_url},
                    capture_output=True, text=True, timeout=30)
            except subprocess.TimeoutExpired:
                pytest.fail("migrate through the pooler waited for a session lock")
            assert result.returncode == 0, result.stderr


def test_the_console_serves_pages_and_metrics_through_the_pooler(pooled_url, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret", "DATABASE_URL": pooled_url,
                      "METRICS_TOKEN": "scrape-token-0123456789"})
    try:
        client = app.test_client()
        for _ in range(8):  # more than psycopg's prepare threshold of 5, on the pool's conns
            response = client.get("/metrics",
                                  headers={"Authorization": "Bearer scrape-token-0123456789"})
            assert response.status_code == 200 and b"jobwarden_jobs" in response.data
        login(client, "vera")
        for path in ("/", "/jobs", "/queues", "/schedules", "/sla", "/workers"):
            assert client.get(path).status_code == 200, path
    finally:
        app.extensions["jobwarden_db"].dispose()


@pytest.mark.parametrize("listen", ["polling", "direct LISTEN"])
def test_worker_processes_drain_a_backlog_through_the_pooler(pooled_url, clean_db, conn, listen):
    jobs = 400
    conn.execute("DROP TABLE IF EXISTS race_log")
    conn.execute("CREATE TABLE race_log (job_id bigint, execution_id uuid, pid int)")
    enqueue_many(conn, [JobSpec("race", {"n": i}) for i in range(jobs)])
    conn.commit()
    env = {**os.environ, "DATABASE_URL": pooled_url}
    if listen == "direct LISTEN":
        env["JOBWARDEN_LISTEN_URL"] = clean_db
    procs = [start_process(
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "worker", "--app",
         "tests.apps.race_app", "--poll-interval", "0.2", "--concurrency", "4"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    try:
        wait_for(lambda: status_counts(clean_db).get("completed") == jobs, timeout=120,
                 interval=0.2, message=f"{jobs} jobs to complete through the pooler")
    finally:
        errors = [err.decode() for _, err in stop_processes(procs, signal.SIGTERM)]
    assert [p.returncode for p in procs] == [0, 0], errors
    assert not any("prepared statement" in e or "Traceback" in e for e in errors), errors
    assert scalar(clean_db, "SELECT count(DISTINCT job_id) FROM race_log") == jobs
    assert scalar(clean_db, "SELECT count(*) FROM job_workers WHERE state = 'stopped'") == 2
