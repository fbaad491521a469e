"""Log output of the `jobwarden` commands: text for people, JSON lines for machines.

`--log-format json` (or JOBWARDEN_LOG_FORMAT=json) prints one JSON object per log record:
`time`, `level`, `logger`, `message`, and the record's fields — every lifecycle event
carries a stable `action` and what it concerns (`job_id`, `job_type`, `execution_id`,
`attempt`, `error_code`, ...). The catalogue of actions is in docs/operations.md §4.

The JSON comes from python-json-logger: it serialises a record's `extra` fields (UUIDs,
datetimes included) and escapes messages correctly, which a hand-written formatter would
have to get right again.
"""

from __future__ import annotations

import logging

from pythonjsonlogger.json import JsonFormatter

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def json_formatter() -> logging.Formatter:
    """A formatter writing one JSON object per record, with the record's extra fields."""
    return JsonFormatter("{asctime}{levelname}{name}{message}", style="{",
                         rename_fields={"asctime": "time", "levelname": "level",
                                        "name": "logger"},
                         datefmt="%Y-%m-%dT%H:%M:%S%z")


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Set up the root logger for a command: `fmt` is "text" or "json"."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (use {' or '.join(FORMATS)})")
    handler = logging.StreamHandler()
    handler.setFormatter(json_formatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        handlers=[handler])
    from .sanitize import redact_log_handlers

    redact_log_handlers()  # every line, JSON or text, the handlers' own logging included
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("pgserver").setLevel(logging.WARNING)  # it narrates every start
