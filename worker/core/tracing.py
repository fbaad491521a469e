"""Traces from request to job, with OpenTelemetry's API when it is installed.

Enqueue keeps the trace current at the call (`current_context`, stored on the job as the
W3C propagator's JSON object); the worker runs each execution in a span of its own
(`execution_span`): a CONSUMER span whose parent is that context for a job's first
attempt, and which *links* to it for a retry (a new trace: a retry hours later is not one
more child of a request that ended long ago). Its attributes are the job's id, type,
queue, attempt, outcome and error code.

Without `opentelemetry-api` nothing is done. With it, its API is imported here only once
something else imported it (`in_use`): importing it took milliseconds of every process
that imports Jobwarden, a worker's before its first claim. With no tracer provider
configured (the API's default), enqueue stores nothing and the worker starts no span
(the provider is asked about at most once a second).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any


def _installed() -> bool:
    """Whether the API is installed: found, not imported (in_use)."""
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except ImportError:  # no opentelemetry package at all
        return False


#: Whether the optional package is installed.
INSTALLED = _installed()

if TYPE_CHECKING:
    from opentelemetry.trace import Span

#: The instrumentation's name, as tracers and span attributes carry it.
TRACER_NAME = "jobwarden"
#: The W3C header a stored context must hold to be used (docs/guide/traces.md).
TRACEPARENT = "traceparent"
#: Outcomes that end a span in error: the handler failed, or may have (not a skip, a
#: cancel, a snooze or a hand-back at shutdown, which are the job's course, not faults).
ERRORS = frozenset({"retry", "failed", "unknown", "timeout", "worker_lost"})
#: A stored context bigger than this is not a propagator's (it is ignored, not parsed).
MAX_CONTEXT_BYTES = 2048


#: How often `enabled` asks the API again: reading the provider costs about 0.6 µs (an
#: environment lookup), asked once per execution; a provider an application sets after
#: the worker started is seen within this time.
RECHECK_SECONDS = 1.0
_recheck_at = float("-inf")
_enabled = False


def in_use() -> bool:
    """Whether tracing may be on: the API is installed and something imported it. A tracer
    provider is set, and a span made current, through the API alone, so until an
    application's setup (or an instrumentation's) imports it there is nothing to trace.
    The one provider set without it, the one named by OTEL_PYTHON_TRACER_PROVIDER, the
    API loads at its first use, and that variable counts as a use."""
    return INSTALLED and ("opentelemetry.trace" in sys.modules
                          or bool(os.environ.get("OTEL_PYTHON_TRACER_PROVIDER")))


def enabled() -> bool:
    """Whether spans are recorded: the package is there and an application configured a
    tracer provider (the API's own default is a proxy that records nothing)."""
    global _recheck_at, _enabled
    if not INSTALLED:
        return False
    now = time.monotonic()
    if now >= _recheck_at:  # a race here only asks twice: both answers are the same
        _enabled = in_use() and _provider_configured()
        _recheck_at = now + RECHECK_SECONDS
    return _enabled


def _provider_configured() -> bool:
    # The API is imported here and in the functions below once in_use() says tracing may
    # be on: never at the import of this module (module docstring).
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def recheck() -> None:
    """Ask the API again at the next `enabled` (after setting or resetting the provider)."""
    global _recheck_at
    _recheck_at = float("-inf")


def current_context() -> str | None:
    """The trace current here, as the JSON object the global propagator writes
    (`traceparent`, `tracestate`, baggage), or None outside any valid trace."""
    if not in_use():
        return None
    # Imported once in use (_provider_configured says why).
    from opentelemetry import propagate, trace

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return json.dumps(carrier, separators=(",", ":")) if TRACEPARENT in carrier else None


def trace_id(stored: str | None) -> str | None:
    """The 32-hex-digit trace id of a stored context (for the console's trace link), or
    None when there is none or it is not a W3C traceparent."""
    carrier = _carrier(stored)
    parts = carrier.get(TRACEPARENT, "").split("-") if carrier else []
    if len(parts) < 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    try:
        int(parts[1], 16)
    except ValueError:
        return None
    return parts[1].lower()


def _carrier(stored: str | None) -> dict[str, str] | None:
    if not stored or len(stored) > MAX_CONTEXT_BYTES:
        return None
    try:
        carrier = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(carrier, dict):
        return None
    return {str(k): v for k, v in carrier.items() if isinstance(v, str)}


@contextmanager
def execution_span(*, job_id: int, job_type: str, queue: str, attempt: int,
                   stored: str | None) -> Iterator[Span | None]:
    """The span an execution runs in, current for the handler (its own spans are its
    children); None when tracing is off. The caller records the outcome (`ended`)."""
    if not enabled():
        yield None
        return
    # Imported once in use (_provider_configured says why).
    from opentelemetry import context, propagate, trace

    carrier = _carrier(stored)
    extracted = propagate.extract(carrier) if carrier else None
    enqueued = (trace.get_current_span(extracted).get_span_context()
                if extracted is not None else None)
    if enqueued is not None and not enqueued.is_valid:
        enqueued = None
    first = attempt <= 1
    parent = extracted if enqueued is not None and first else None
    links = [trace.Link(enqueued)] if enqueued is not None and not first else None
    attributes: dict[str, Any] = {
        "messaging.system": "jobwarden", "messaging.operation.type": "process",
        "messaging.destination.name": queue, "messaging.message.id": str(job_id),
        "jobwarden.job.id": job_id, "jobwarden.job.type": job_type,
        "jobwarden.job.attempt": attempt}
    tracer = trace.get_tracer(TRACER_NAME)
    # An empty Context with no parent: a root span (a retry's trace starts here), never
    # a child of whatever span the worker's thread has current.
    span = tracer.start_span(f"process {job_type}", context=parent or context.Context(),
                             kind=trace.SpanKind.CONSUMER, attributes=attributes, links=links)
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=False,
                            set_status_on_exception=False):
            yield span
    finally:
        span.end()


def ended(span: Span | None, *, outcome: str | None, error_code: str | None,
          error: str | None) -> None:
    """Record an execution's outcome on its span: its outcome and code as attributes, and
    an ERROR status for a failure (ERRORS; the description: the sanitized error text, as
    the console shows it), OK for a completion."""
    if span is None:
        return
    # Imported once in use (_provider_configured says why): a span is the API's.
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("jobwarden.job.outcome", outcome or "lost")
    if error_code:
        span.set_attribute("jobwarden.error_code", error_code)
    if outcome == "completed":
        span.set_status(Status(StatusCode.OK))
    elif outcome in ERRORS:
        span.set_status(Status(StatusCode.ERROR, (error or error_code or outcome)[:500]))
