"""Helpers shared by the test tiers: waiting on conditions, reading jobs, running workers."""

from __future__ import annotations

import asyncio
import functools
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row

from jobwarden.worker.jobs.registry import Registry
from jobwarden.worker.process import WorkerProcess

#: The two kinds of handler a guarantee is tested for: a plain function on a slot thread,
#: and an `async def` on its lane's event loop (worker/engine/loops.py).
HANDLER_KINDS = ("thread", "coroutine")


def as_handler_kind(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator turning a handler written for a slot thread into `kind`: itself, or an
    `async def` that yields to its loop once and then runs the same body there. For
    bodies that use only what both contexts share (identity, cancel_requested, raising);
    a body that awaits ctx calls is written as a coroutine of its own."""
    def make(fn: Callable[..., Any]) -> Callable[..., Any]:
        if kind == "thread":
            return fn

        @functools.wraps(fn)
        async def coroutine(ctx: Any, payload: Any) -> Any:
            await asyncio.sleep(0)
            return fn(ctx, payload)
        return coroutine
    assert kind in HANDLER_KINDS, kind
    return make


def run_async(coro: Any) -> Any:
    """Run a coroutine to its end from a synchronous test (the async enqueue tests), on a
    thread of its own: in a session that ran the browser tests, Playwright's sync API
    leaves an event loop marked running on the main thread, where asyncio.run refuses."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


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


def with_query(url: str, **params: str) -> str:
    """`url` with `params` added to its query (the embedded server's URL has one already)."""
    parts = urlsplit(url)
    query = "&".join(filter(None, [parts.query, urlencode(params)]))
    return urlunsplit(parts._replace(query=query))


def executions(url: str, job_id: int) -> list[dict]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute("SELECT * FROM job_executions_all WHERE job_id = %s "
                            "ORDER BY attempt, id NULLS LAST",
                            [job_id]).fetchall()


def status_counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute(
            "SELECT status, count(*) FROM background_jobs GROUP BY status").fetchall())


def explained(conn: psycopg.Connection, *, nested: bool = False) -> list[str]:
    """Have auto_explain send each statement's plan (a trigger's too with `nested`) to
    `conn`'s client as a notice; the list the plans are appended to, as they come."""
    plans: list[str] = []
    conn.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
    for setting in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                    f"SET auto_explain.log_nested_statements = {'on' if nested else 'off'}",
                    "SET auto_explain.log_level = notice"):
        conn.execute(setting)
    return plans


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


def start_process(args: list[str], **popen) -> subprocess.Popen:
    """Popen in a process group of its own, so that stop_process can kill whatever it
    started too."""
    return subprocess.Popen(args, process_group=0, **popen)


def stop_processes(procs: list[subprocess.Popen], signum: int = signal.SIGTERM,
                   grace: float = 60.0) -> list[tuple[Any, Any]]:
    """Send `signum` to each start_process process (all first, so that they drain at the
    same time), reap them and return their (stdout, stderr).

    One still running `grace` seconds later is killed with its whole process group, and
    then the test fails: the processes are gone either way, never left behind the suite.
    """
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signum)
    deadline = time.monotonic() + grace
    outputs, stuck = [], []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # not started by start_process: no group of its own
                proc.kill()
            outputs.append(proc.communicate())
            stuck.append(proc.args[0])
    assert not stuck, f"{stuck} did not stop within {grace}s of {signal.Signals(signum).name}: killed"
    return outputs


def stop_process(proc: subprocess.Popen, signum: int = signal.SIGTERM,
                 grace: float = 60.0) -> tuple[Any, Any]:
    """stop_processes for one process."""
    return stop_processes([proc], signum, grace)[0]


def first_line(proc: subprocess.Popen, timeout: float = 60.0) -> str:
    """The first line `proc` prints on stdout; '' if it exits or says nothing in time
    (readline alone would wait forever on a process that hangs before printing)."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""
