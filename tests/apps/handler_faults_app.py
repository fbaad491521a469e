"""Hostile handlers, for tests/chaos/test_handler_faults.py: handlers that raise what is
not an Exception (SystemExit, KeyboardInterrupt, GeneratorExit, a BaseException of their
own), stop their lane's event loop, block it for a moment, or run past their timeout.

Every type has a 30 s lease, so the worker's heartbeat beats every 10 s: whatever these
tests see happen within a few seconds is the worker's doing between two beats, not the
heartbeat's. They report through chaos_events (tests/apps/chaos_app.py, `note`).
"""

from __future__ import annotations

import asyncio
import logging
import time

from jobwarden import RetryableError, job, registry
from tests.apps.chaos_app import FAST, note

# Importing chaos_app registered its handlers: this app serves only its own.
registry.clear()

QUEUE = "faults"
#: How long a handler that overran waits for the worker to record its execution's end.
SEE_END_SECONDS = 5.0


class Custom(BaseException):
    """A BaseException of the handler's own, as some libraries define."""


def raise_kind(kind: str) -> None:
    if kind == "SystemExit":
        raise SystemExit(3)
    if kind == "KeyboardInterrupt":
        raise KeyboardInterrupt
    if kind == "GeneratorExit":
        raise GeneratorExit
    if kind == "custom":
        raise Custom("a handler's own BaseException")
    raise AssertionError(f"unknown kind {kind!r}")


class ProviderError(Exception):
    """A provider's error whose __str__ reads a field its response may lack."""

    def __init__(self, response: dict):
        super().__init__(response)
        self.response = response

    def __str__(self) -> str:
        return f"provider said {self.response['error']}"  # KeyError: no 'error'


class NonStrError(Exception):
    def __str__(self):
        return 42  # TypeError: __str__ returned non-string


class ExitStrError(Exception):
    def __str__(self):
        raise SystemExit(3)


class ExitStrRetryable(RetryableError):
    def __str__(self):
        raise SystemExit(3)


def raise_unprintable(kind: str) -> None:
    if kind == "KeyError":
        raise ProviderError({"status": 500})
    if kind == "non-str":
        raise NonStrError("x")
    if kind == "SystemExit":
        raise ExitStrError("x")
    if kind == "retryable":
        raise ExitStrRetryable("API_ERROR", "provider answered 500")
    raise AssertionError(f"unknown kind {kind!r}")


def end_recorded(ctx) -> bool:
    """Whether the worker has recorded this execution's end."""
    with ctx._pool.connection() as conn:
        row = conn.execute("SELECT finished_at IS NOT NULL FROM job_executions_all "
                           "WHERE execution_id = %s", [ctx.execution_id]).fetchone()
    return bool(row and row[0])


def wait_for_end(ctx) -> bool:
    deadline = time.monotonic() + SEE_END_SECONDS
    while time.monotonic() < deadline:
        if end_recorded(ctx):
            return True
        time.sleep(0.05)
    return False


@job("faults.raise", queue=QUEUE, lease=30, timeout=30, max_attempts=1, backoff=FAST)
def raising_job(ctx, payload):
    note(ctx, "started")
    raise_kind(payload["kind"])


@job("faults.araise", queue=QUEUE, lease=30, timeout=30, max_attempts=1, backoff=FAST)
async def araising_job(ctx, payload):
    await asyncio.to_thread(note, ctx, "started")
    await asyncio.sleep(0.05)  # a real await first: the task is suspended on the loop
    if payload["kind"] == "loop_stop":
        asyncio.get_running_loop().stop()
        await asyncio.sleep(0.05)
        await asyncio.to_thread(note, ctx, "returned")
        return
    raise_kind(payload["kind"])


@job("faults.steady", queue=QUEUE, lease=30, timeout=30, max_attempts=1, backoff=FAST)
async def steady_job(ctx, payload):
    """An innocent coroutine: awaits for a while, noting its start and its end."""
    await asyncio.to_thread(note, ctx, "start")
    await asyncio.sleep(payload.get("seconds", 0.3))
    await asyncio.to_thread(note, ctx, "end")


@job("faults.tsteady", queue=QUEUE, lease=30, timeout=30, max_attempts=1, backoff=FAST)
def thread_steady_job(ctx, payload):
    note(ctx, "start")
    ctx.wait_cancelled(payload.get("seconds", 0.3))
    note(ctx, "end")


def gate_open(ctx) -> bool:
    """Whether the test has opened this job's gate (a row in chaos_gates)."""
    with ctx._pool.connection() as conn:
        return conn.execute("SELECT 1 FROM chaos_gates WHERE job_id = %s",
                            [ctx.job_id]).fetchone() is not None


@job("faults.gated", queue=QUEUE, lease=30, timeout=60, max_attempts=1, backoff=FAST)
async def gated_job(ctx, payload):
    """An innocent coroutine that runs until the test opens its gate."""
    await asyncio.to_thread(note, ctx, "start")
    while not await asyncio.to_thread(gate_open, ctx):
        await asyncio.sleep(0.05)
    await asyncio.to_thread(note, ctx, "end")


@job("faults.tgated", queue=QUEUE, lease=30, timeout=60, max_attempts=1, backoff=FAST)
def thread_gated_job(ctx, payload):
    note(ctx, "start")
    while not gate_open(ctx):
        time.sleep(0.05)
    note(ctx, "end")


@job("faults.block", queue=QUEUE, lease=30, timeout=30, max_attempts=1, backoff=FAST)
async def blocking_job(ctx, payload):
    """Blocks its lane's loop for a moment (a synchronous call in a coroutine)."""
    await asyncio.to_thread(note, ctx, "started")
    time.sleep(payload.get("seconds", 2.0))
    await asyncio.to_thread(note, ctx, "returned")


@job("faults.swallow", queue=QUEUE, lease=30, timeout=1, max_attempts=1, backoff=FAST)
async def swallowing_job(ctx, payload):
    """Overruns its 1 s timeout and swallows the CancelledError of it, then waits (a few
    seconds at most) for the worker to record its execution's end, says whether it saw
    it, and returns as if all went well."""
    await asyncio.to_thread(note, ctx, "started")
    if payload.get("prompt"):
        return  # within its timeout
    try:
        await asyncio.sleep(2)
    except asyncio.CancelledError:
        await asyncio.to_thread(note, ctx, "swallowed")
    saw = await asyncio.to_thread(wait_for_end, ctx)
    await asyncio.to_thread(note, ctx, "saw_end" if saw else "no_end")


@job("faults.overrun", queue=QUEUE, lease=30, timeout=1, max_attempts=1, backoff=FAST)
def overrunning_job(ctx, payload):
    """A thread handler that ignores its 1 s timeout, waits (a few seconds at most) for
    the worker to record its execution's end, says whether it saw it, and returns."""
    note(ctx, "started")
    if payload.get("prompt"):
        return  # within its timeout
    note(ctx, "saw_end" if wait_for_end(ctx) else "no_end")  # deaf to the cancel signal


@job("faults.unprintable", queue=QUEUE, lease=30, timeout=30, max_attempts=1, backoff=FAST)
def unprintable_job(ctx, payload):
    note(ctx, "started")
    raise_unprintable(payload["kind"])


@job("faults.aunprintable", queue=QUEUE, lease=30, timeout=30, max_attempts=1, backoff=FAST)
async def aunprintable_job(ctx, payload):
    await asyncio.to_thread(note, ctx, "started")
    await asyncio.sleep(0)
    raise_unprintable(payload["kind"])


def api_body(chars: int) -> str:
    """A minified API listing with bare https:// URLs and no '@', as long as asked."""
    item = '{"id":1,"homepage":"https://site1.example.com"},'
    return "[" + item * (chars // len(item)) + "]"


@job("faults.huge_error", queue=QUEUE, lease=30, timeout=30, max_attempts=1, backoff=FAST)
def huge_error_job(ctx, payload):
    """Raises an error of a megabyte: redacted whole, it held the GIL for minutes."""
    note(ctx, "started")
    logging.getLogger("faults").warning("provider answered 500: %s", api_body(payload["chars"]))
    raise RetryableError("API_ERROR", "provider answered 500: " + api_body(payload["chars"]))


TYPES = [raising_job, araising_job, steady_job, thread_steady_job, gated_job,
         thread_gated_job, blocking_job, swallowing_job, overrunning_job, unprintable_job,
         aunprintable_job, huge_error_job]
