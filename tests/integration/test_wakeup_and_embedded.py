"""Workers wake on NOTIFY, not only on polls; commands fall back to the embedded server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from jobwarden import Registry, enqueue, job
from jobwarden.worker.engine.listener import LISTEN_APPLICATION_NAME
from tests.helpers import job_row, running_worker, scalar, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_an_idle_worker_wakes_on_notify_long_before_its_next_poll(conn, clean_db):
    reg = Registry()

    @job("ping", registry=reg)
    def ping(ctx, payload):
        pass

    with running_worker(reg, clean_db, poll_interval=60):
        # Wait until the worker's LISTEN connection is up (the wake-up under test): its
        # claim connection, named so (its last query shown is a claim, not the LISTEN).
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM pg_stat_activity WHERE "
                                "datname = current_database() AND application_name = %s",
                                [LISTEN_APPLICATION_NAME]),
                 timeout=10, message="the worker to LISTEN")
        started = time.monotonic()
        job_id = enqueue(conn, "ping", {}, registry=reg)
        conn.commit()
        wait_for(lambda: job_row(clean_db, job_id)["status"] == "completed", timeout=20,
                 message="the notified worker to run the job")
        # A 60 s poll would not have found it yet: the NOTIFY on commit woke the worker.
        assert time.monotonic() - started < 20


def test_without_database_url_commands_use_an_embedded_postgresql(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["JOBWARDEN_HOME"] = str(tmp_path / "jw")
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", *args], cwd=ROOT,
        env=env, capture_output=True, text=True, timeout=180)
    try:
        assert run("migrate").returncode == 0
        added = run("enqueue", "send_email", "--payload", '{"userId": 1}')
        assert added.returncode == 0, added.stderr
        stats = json.loads(run("stats", "--json").stdout)
        assert stats["by_status"] == {"pending": 1}
        assert (tmp_path / "jw" / "pgdata" / "PG_VERSION").exists()
    finally:
        # pgserver leaves its server running for the next command: stop this one (fast
        # shutdown, by signal, since it runs as its own OS user).
        pidfile = tmp_path / "jw" / "pgdata" / "postmaster.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text().split()[0])
            os.kill(pid, signal.SIGINT)
            wait_for(lambda: not pidfile.exists(), timeout=30, message="embedded server to stop")
