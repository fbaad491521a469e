"""Helpers shared by the test tiers: waiting on conditions, reading jobs, running workers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from worker.process import WorkerProcess
from worker.registry import Registry


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05,
             message: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def job_row(url: str, job_id: int) -> dict:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        row = conn.execute("SELECT *, available_at > now() AS in_future, "
                           "extract(epoch FROM available_at - now()) AS available_in "
                           "FROM background_jobs WHERE id = %s", [job_id]).fetchone()
    assert row is not None, f"job {job_id} does not exist"
    return row


def executions(url: str, job_id: int) -> list[dict]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute("SELECT * FROM job_executions WHERE job_id = %s ORDER BY attempt, id",
                            [job_id]).fetchall()


def status_counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute(
            "SELECT status, count(*) FROM background_jobs GROUP BY status").fetchall())


def scalar(url: str, sql: str, params: Any = None) -> Any:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchone()[0]


@contextmanager
def running_worker(registry: Registry, url: str, **options):
    """A WorkerProcess running in a background thread of the test process."""
    options.setdefault("concurrency", 2)
    options.setdefault("poll_interval", 0.1)
    options.setdefault("grace", 5.0)
    worker = WorkerProcess(registry, url=url, **options)
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.setdefault("rc", worker.run()),
                              name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "worker did not stop within 30s"
