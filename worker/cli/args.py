"""Argument types for the `jobwarden` command line: argparse `type=` functions.

Each turns one command-line string into a checked value or raises ArgumentTypeError, so a
bad argument is one clear `error: argument --delay: …` line (exit status 2) before any
connection is opened, wherever the command that takes it is defined.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from typing import Any

from jobwarden.worker.core.durations import DurationRule
from jobwarden.worker.core.durations import shown as _shown
from jobwarden.worker.core.errors import EnqueueError
from jobwarden.worker.engine.config import MAX_FLUSH_WRITERS
from jobwarden.worker.engine.lanes import MAX_SLOTS, parse_queues
from jobwarden.worker.jobs.job_spec import (
    INT32,
    MAX_ATTEMPTS,
    MAX_KEY_CHARS,
    check_payload,
)

BIGINT = 2**63 - 1
Bad = argparse.ArgumentTypeError


def integer(low: int, high: int) -> Callable[[str], int]:
    """An integer from `low` to `high`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise Bad(f"{_shown(text)} is not a whole number") from None
        if not low <= value <= high:
            raise Bad(f"{_shown(text)} is not between {low} and {high}")
        return value

    parse.__name__ = "integer"  # argparse names the type in some messages
    return parse


def number(low: float, high: float) -> Callable[[str], float]:
    """A finite number from `low` to `high`. float() alone would take "-5", "nan" and
    "inf", which no count or wait can mean."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise Bad(f"{_shown(text)} is not a number") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise Bad(f"{_shown(text)} is not between {low:g} and {high:g}")
        return value

    parse.__name__ = "number"
    return parse


#: A job id (a positive bigint).
job_id = integer(1, BIGINT)
#: A TCP port to listen on (0: any free port).
port = integer(0, 65535)
priority = integer(-INT32 - 1, INT32)
max_attempts = integer(1, MAX_ATTEMPTS)
concurrency = integer(1, MAX_SLOTS)
#: Worker tuning: jobs per claim, outcomes per flush, claimed jobs waiting for a slot,
#: abandoned handler threads tolerated.
batch = integer(1, 10_000)
writers = integer(1, MAX_FLUSH_WRITERS)
buffer = integer(0, 100_000)
abandoned = integer(0, 10_000)
#: Milliseconds an outcome may wait for its batch (0: flush at once; at most an hour, so
#: a test or a drill may hold outcomes back for minutes).
flush_ms = number(0, 3_600_000)
list_limit = integer(1, 10_000)


def duration(rule: DurationRule) -> Callable[[str], float]:
    """Seconds from `30`, `30s`, `5m`, `2h` or `7d`, as `rule` takes them: the notation
    of @job and of the JOBWARDEN_* settings (worker/core/durations.py)."""

    def parse(text: str) -> float:
        try:
            return rule.parse(text)
        except ValueError as exc:
            raise Bad(str(exc)) from None

    parse.__name__ = "duration"
    return parse


#: A delay before a job may run (0 to ten years).
delay = duration(DurationRule())
#: An age or staleness threshold: more than zero.
age = duration(DurationRule(positive=True))
#: The age past which `prune` deletes finished jobs: with a unit, since a mistake there
#: deletes data.
prune_age = duration(DurationRule(positive=True, unit=True))
#: Seconds a worker waits (grace periods: 0 is allowed, meaning no wait; at most a day).
wait_seconds = duration(DurationRule(maximum=86_400))
#: Seconds between polls: more than zero, or the worker would spin; at most an hour.
poll_seconds = duration(DurationRule(positive=True, maximum=3_600))


def json_object(text: str) -> dict[str, Any]:
    """A JSON object that enqueue would accept (depth, keys and text checked)."""
    try:
        value: dict[str, Any] = json.loads(text)  # an object, or check_payload says not
    except json.JSONDecodeError as exc:
        raise Bad(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise Bad("nested far too deeply") from None
    try:
        check_payload(value)
    except EnqueueError as exc:
        raise Bad(str(exc)) from None
    return value


def queue_spec(text: str) -> str:
    """`--queues`: `name=N` entries and plain names, checked as the worker reads them
    (worker/engine/lanes.py); the plain names' slots come from --concurrency, checked apart."""
    try:
        parse_queues(text, concurrency=1)
    except ValueError as exc:
        raise Bad(str(exc)) from None
    return text


def key(text: str) -> str:
    """An idempotency or concurrency key: valid Unicode text of at most MAX_KEY_CHARS."""
    if any("\udc80" <= c <= "\udcff" for c in text):
        # Undecodable bytes in argv arrive as lone surrogates (surrogateescape).
        raise Bad("contains bytes that are not valid text in this locale's encoding")
    if not 0 < len(text) <= MAX_KEY_CHARS:
        raise Bad(f"needs 1-{MAX_KEY_CHARS} characters, not {len(text)}")
    return text
