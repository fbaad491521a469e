"""Jinja filters: ages, durations, timestamps (all shown by `when`), sanitized payloads
and errors, progress."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from flask import Blueprint, has_request_context, request
from flask.blueprints import BlueprintSetupState
from markupsafe import Markup

from jobwarden.worker.core.sanitize import redact, sanitize_payload, sanitize_text
from jobwarden.worker.core.terminal import visible_controls


def age(seconds: float | None) -> str:
    """A compact duration: 850ms, 42s, 3m 12s, 5h 02m, 2d 4h."""
    if seconds is None:
        return "—"
    seconds = float(seconds)
    if seconds < 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def millis(value: float | None) -> str:
    return "—" if value is None else age(float(value) / 1000.0)


def timestamp(value: datetime, zone: tzinfo = UTC) -> str:
    """To the second, in `zone` (UTC unless a schedule's own), with the zone's name."""
    local = value.astimezone(zone)
    return f"{local.strftime('%Y-%m-%d %H:%M:%S')} {local.tzname() or zone}"


def when(value: datetime | None, zone: str | None = None, *,
         now: datetime | None = None) -> Markup:
    """Every timestamp the console shows: the time with its zone, then its relative age
    ("3m 12s ago", "in 5m 00s"), the instant itself machine-readable in <time datetime>.
    UTC unless `zone` is given (a schedule is shown in the zone its cron is read in)."""
    if value is None:
        return Markup("—")
    delta = ((now or datetime.now(UTC)) - value).total_seconds()
    relative = f"{age(delta)} ago" if delta >= 0 else f"in {age(-delta)}"
    shown = timestamp(value, ZoneInfo(zone) if zone else UTC)
    return Markup('<time datetime="{}">{}</time> <span class="note">{}</span>').format(
        iso(value), shown, relative)


def iso(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat()


def time_input(value: datetime | None) -> str:
    """A moment as a datetime-local input's value: in UTC (the zone the console reads a
    typed time in), to the second."""
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def line_time(value: float | None) -> Markup:
    """A log line's time (unix seconds): to the millisecond in UTC, the instant itself
    machine-readable in <time datetime>."""
    if value is None:
        return Markup("—")
    moment = datetime.fromtimestamp(float(value), UTC)
    return Markup('<time datetime="{}">{}</time>').format(
        moment.isoformat(), moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}")


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def sanitized_json(value: Any) -> str:
    """A payload/checkpoint as indented JSON with secrets redacted (escaped by Jinja)."""
    if value is None:
        return "—"
    return json.dumps(sanitize_payload(value), indent=2, sort_keys=True, ensure_ascii=False,
                      default=str)


def sanitized_text(value: str | None, max_chars: int = 2000) -> str:
    return sanitize_text(value, max_chars=max_chars) or ""


def redact_output(value: Any) -> Any:
    """Jinja's finalize hook: every `{{ value }}` on every page, fragment and flash message
    goes through jobwarden.worker.core.sanitize.redact, whichever field it came from (keys, codes,
    reasons, names), and shows control and bidi characters as escapes (`\\u202e`, as the
    CLI does), so stored text cannot reorder what the operator reads. Markup is HTML the
    console built itself (form widgets), not data."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible_controls(redact(value))
    return value


def progress_fraction(progress: Any) -> float | None:
    """0..1 from the shapes handlers report: a number, {percent}, {done,total} and the like."""
    if isinstance(progress, bool) or progress is None:
        return None
    if isinstance(progress, int | float):
        value = float(progress)
        return _unit(value / 100.0 if value > 1 else value)
    if isinstance(progress, dict):
        for key in ("fraction", "ratio"):
            if isinstance(progress.get(key), int | float):
                return _unit(float(progress[key]))
        if isinstance(progress.get("percent"), int | float):
            return _unit(float(progress["percent"]) / 100.0)
        for done_key, total_key in (("processed", "total"), ("done", "total"),
                                    ("current", "total"), ("n", "of")):
            done, total = progress.get(done_key), progress.get(total_key)
            if isinstance(done, int | float) and isinstance(total, int | float) and total > 0:
                return _unit(float(done) / float(total))
    return None


def _unit(value: float) -> float:
    return max(0.0, min(1.0, value))


FILTERS = {
    "age": age, "millis": millis, "when": when, "iso": iso, "percent": percent,
    "sanitized_json": sanitized_json, "sanitized_text": sanitized_text,
    "progress_fraction": progress_fraction, "time_input": time_input,
    "line_time": line_time,
}


def install(bp: Blueprint, more: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """The console's Jinja filters (FILTERS and `more`: those of modules that build on this
    one, such as the JSON tree). Jinja has no per-blueprint filters: they join the
    host's, and a host filter of the same name is an error rather than silently replaced."""
    console_filters = {**FILTERS, **(more or {})}

    def register(state: BlueprintSetupState) -> None:
        filters = state.app.jinja_env.filters
        taken = sorted(name for name, fn in console_filters.items()
                       if filters.get(name, fn) is not fn)
        if taken:
            raise RuntimeError(f"the app already has Jinja filters named {', '.join(taken)}, "
                               "which the Jobwarden console's templates use")
        filters.update(console_filters)
        # Jinja has one finalize per environment: the console's redaction applies while it
        # renders its own pages, and the host's pages keep whatever finalize they had.
        env = state.app.jinja_env
        host_finalize = env.finalize

        def finalize(value: Any) -> Any:
            if _console_request():
                return redact_output(value)
            return host_finalize(value) if host_finalize else value

        env.finalize = finalize

    bp.record_once(register)


def _console_request() -> bool:
    return has_request_context() and "jobwarden" in request.blueprints
