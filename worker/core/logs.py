"""Log output of the `jobwarden` commands: text for people, JSON lines for machines.

`--log-format json` (or JOBWARDEN_LOG_FORMAT=json) prints one JSON object per log record:
`time`, `level`, `logger`, `message`, and the record's fields — every lifecycle event
carries a stable `action` and what it concerns: an execution's events carry the fields
execution_event() gives (`job_id`, `job_type`, `queue`, `execution_id`, `attempt`,
`error_code`, `duration_ms`). The catalogue of actions is in docs/operations.md §4.

The JSON comes from python-json-logger: it serialises a record's `extra` fields (UUIDs,
datetimes included) and escapes messages correctly, which a hand-written formatter would
have to get right again.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol
from uuid import UUID

from jobwarden.worker.core.sanitize import redact_log_handlers

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def json_formatter() -> logging.Formatter:
    """A formatter writing one JSON object per record, with the record's extra fields."""
    # Imported for JSON output only: a worker logging text (the default) never needs it,
    # and its import is milliseconds of the worker's start (tests/unit/test_worker_imports.py).
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter("{asctime}{levelname}{name}{message}", style="{",
                         rename_fields={"asctime": "time", "levelname": "level",
                                        "name": "logger"},
                         datefmt="%Y-%m-%dT%H:%M:%S%z")


def execution_event(action: str, *, job_id: int, job_type: str, queue: str, execution_id: Any,
                    attempt: int, duration_ms: float | None,
                    error_code: str | None = None) -> dict[str, Any]:
    """The `extra` of one execution's lifecycle line: the same fields on every such line.
    `duration_ms` is how long the handler had run, in milliseconds on the worker's clock
    (None: it never started)."""
    return {"action": action, "job_id": job_id, "job_type": job_type, "queue": queue,
            "execution_id": str(execution_id), "attempt": attempt, "error_code": error_code,
            "duration_ms": None if duration_ms is None else round(duration_ms, 3)}


class _Execution(Protocol):
    """What the events read of an execution (an ExecutionControl or a ClaimedJob): declared
    here so that the logs, a low layer, import neither."""

    type: str
    queue: str
    execution_id: UUID
    attempt: int


class _Running(_Execution, Protocol):
    job_id: int
    started: float  # a time.monotonic() reading


class _Waiting(_Execution, Protocol):
    id: int


def running_event(action: str, ctx: _Running, error_code: str | None = None) -> dict[str, Any]:
    """execution_event() for an execution still in its slot (an ExecutionControl): its duration
    so far."""
    return execution_event(action, job_id=ctx.job_id, job_type=ctx.type, queue=ctx.queue,
                           execution_id=ctx.execution_id, attempt=ctx.attempt,
                           duration_ms=ms_since(ctx.started), error_code=error_code)


def waiting_event(action: str, job: _Waiting) -> dict[str, Any]:
    """execution_event() for a claimed job that never started (a ClaimedJob)."""
    return execution_event(action, job_id=job.id, job_type=job.type, queue=job.queue,
                           execution_id=job.execution_id, attempt=job.attempt,
                           duration_ms=None)


def ms_since(started: float) -> float:
    """Milliseconds since `started`, a time.monotonic() reading."""
    return (time.monotonic() - started) * 1000


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Set up the root logger for a command: `fmt` is "text" or "json"."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (use {' or '.join(FORMATS)})")
    handler = logging.StreamHandler()
    handler.setFormatter(json_formatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        handlers=[handler])
    redact_log_handlers()  # every line, JSON or text, the handlers' own logging included
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("pgserver").setLevel(logging.WARNING)  # it narrates every start
