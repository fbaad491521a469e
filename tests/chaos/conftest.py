"""Chaos-tier fixtures: real worker processes (killed, frozen, signalled) and a private
PostgreSQL cluster that a test may stop and start. Everything started here is killed in
the fixture's teardown, even when the test fails."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from jobwarden.worker.store import db as dbmod
from tests.apps.chaos_app import create_tables
from tests.helpers import wait_for
from tests.pgcluster import PrivateCluster
from tests.pgcluster import accepts as _accepts

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One `jobwarden worker` subprocess, its log in a file the test can search."""

    def __init__(self, url: str, log: Path, app: str, concurrency: int, grace: float,
                 poll_interval: float, options: tuple[str, ...] = ()):
        self.log = log
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "INFO", "worker", "--app", app,
             "--concurrency", str(concurrency), "--grace", str(grace),
             "--poll-interval", str(poll_interval), *options],
            cwd=ROOT, env={**os.environ, "DATABASE_URL": url},
            stdout=self._out, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            os.kill(self.pid, signum)

    def kill(self) -> None:
        """kill -9, and reap it."""
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def logged(self, text: str) -> bool:
        return text in self.log.read_text(errors="replace")

    def close(self) -> None:
        if self.alive():
            self.signal(signal.SIGCONT)  # a stopped process cannot die until resumed
            self.signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._out.close()


class Workers:
    """Starts workers for a test and makes sure none outlives it."""

    def __init__(self, url: str, tmp: Path):
        self.url = url
        self.tmp = tmp
        self.all: list[Worker] = []

    def start(self, app: str = "tests.apps.chaos_app", *, concurrency: int = 2,
              grace: float = 5.0, poll_interval: float = 0.2, url: str | None = None,
              options: tuple[str, ...] = ()) -> Worker:
        """Start a worker; `options` are further `jobwarden worker` options."""
        w = Worker(url or self.url, self.tmp / f"worker-{len(self.all)}.log", app,
                   concurrency, grace, poll_interval, options)
        self.all.append(w)
        return w

    def logs(self) -> str:
        return "\n".join(f"--- {w.log.name} (pid {w.pid})\n" + w.log.read_text(errors="replace")
                         [-3000:] for w in self.all)

    def close(self) -> None:
        for w in self.all:
            w.close()


#: The chaos handlers of each kind: thread handlers, and the same types as coroutines.
HANDLER_APPS = {"thread": "tests.apps.chaos_app", "coroutine": "tests.apps.chaos_async_app"}


@pytest.fixture(params=sorted(HANDLER_APPS, reverse=True))
def handler_app(request):
    """The chaos app of each handler kind in turn, for `workers.start(handler_app)`: a
    guarantee checked this way holds for thread and coroutine handlers alike."""
    return HANDLER_APPS[request.param]


@pytest.fixture
def chaos_db(clean_db):
    """The clean test database plus the chaos handlers' tables."""
    with psycopg.connect(clean_db) as conn:
        create_tables(conn)
    return clean_db


@pytest.fixture
def workers(chaos_db, tmp_path):
    pool = Workers(chaos_db, tmp_path)
    try:
        yield pool
    finally:
        pool.close()
        print(pool.logs())  # pytest shows it only when the test failed


@pytest.fixture
def private_cluster():
    """A private, migrated PostgreSQL cluster on its own port, destroyed afterwards."""
    cluster = PrivateCluster()
    try:
        cluster.start()
        wait_for(lambda: _accepts(cluster.url), timeout=20, message="the private cluster")
        dbmod.migrate(cluster.url)
        yield cluster
    finally:
        cluster.destroy()


def deadline_passed(seconds: float):
    """A condition for wait_for: true once `seconds` have passed from now (used where a
    fault must last at least that long, e.g. an outage longer than a lease)."""
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end
