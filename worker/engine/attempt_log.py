"""Each attempt's log lines: what its handler logs, kept with its execution.

A handler logs through `ctx.log` or any `logging` logger; one AttemptLogHandler on the
root logger, installed at worker start (install()), keeps the lines that are emitted
while an attempt is current. "Current" is a context variable (CURRENT), set by the runner
around the handler's call: each slot thread has its own context, and each asyncio task a
copy of its creator's, so two handlers logging at once on two threads, or on one loop,
each get their own lines. Code outside any attempt (the worker's threads, a thread the
handler started without copying its context) has none, and its lines are not kept.

Each line is redacted as it is kept (worker/core/sanitize.py: redact), made storable
(NULs, lone surrogates) and cut to LINE_CHARS characters; an attempt keeps its first
ATTEMPT_LOG_BYTES of lines and counts the rest as dropped, without formatting them.
When the attempt's outcome is taken for writing (runner.completion) its lines are
taken with it and the log is closed: a line logged after that (a thread the handler
left running, an abandoned handler) is not kept. The completer writes the lines in the
transaction that writes the outcome (completer.py, write_batch).

A handler that logs nothing costs the set and reset of the context variable: no lines
object is made until a line arrives (bench/bench_attempt_log.py).
"""

from __future__ import annotations

import json
import logging
import threading
from contextvars import ContextVar
from typing import Any, Protocol

from jobwarden.worker.core.sanitize import MAX_LOG_CHARS, redact, safe_str
from jobwarden.worker.core.storable import storable_text

#: The most an attempt keeps, in UTF-8 bytes of its lines' text (plus LINE_OVERHEAD each).
ATTEMPT_LOG_BYTES = 64 * 1024
#: The most one line keeps, in characters (a longer one ends `… [n chars cut]`).
LINE_CHARS = MAX_LOG_CHARS  # as the worker's own log lines keep (sanitize.RedactingFilter)
#: What a line costs the budget besides its text: its time, level and logger.
LINE_OVERHEAD = 48
#: How much of a longer line is redacted before the cut. A secret that starts before the
#: cut ends within this window (the longest shapes, PEM keys, are ~3,300 characters), so
#: its kept start is redacted; a 10 MB line is never run through the patterns whole.
REDACT_WINDOW = 4 * LINE_CHARS


class Attempt(Protocol):
    """What the handler asks of the current attempt (an ExecutionControl)."""

    def attempt_log(self) -> AttemptLog | None: ...


#: The attempt whose handler is running in this thread or task (None: none).
CURRENT: ContextVar[Attempt | None] = ContextVar("jobwarden_attempt", default=None)


class AttemptLog:
    """One attempt's lines, as they arrive from any thread that logs for it."""

    __slots__ = ("lines", "size", "dropped", "closed", "_lock")

    def __init__(self) -> None:
        self.lines: list[list[Any]] = []
        self.size = 0  # bytes kept so far, by the budget's count
        self.dropped = 0
        self.closed = False
        self._lock = threading.Lock()

    def add(self, record: logging.LogRecord) -> None:
        if self.closed:
            return
        if self.size >= ATTEMPT_LOG_BYTES:  # full: count the line, never format it
            with self._lock:
                self.dropped += 0 if self.closed else 1
            return
        text = line_text(record)
        cost = len(text.encode()) + len(record.name) + LINE_OVERHEAD
        with self._lock:
            if self.is_closed():  # taken while this line was being made
                return
            if self.size + cost > ATTEMPT_LOG_BYTES:
                self.size = ATTEMPT_LOG_BYTES  # the first lines are kept, none after a gap
                self.dropped += 1
                return
            self.size += cost
            self.lines.append([round(record.created, 3), record.levelname, record.name, text])

    def is_closed(self) -> bool:
        return self.closed

    def take(self) -> tuple[str | None, int]:
        """Close the log; its lines as JSON text (None: none kept) and how many dropped."""
        with self._lock:
            self.closed = True
            lines, dropped = self.lines, self.dropped
            self.lines = []
        if not lines and not dropped:
            return None, 0
        return json.dumps(lines, ensure_ascii=False, separators=(",", ":")), dropped


def line_text(record: logging.LogRecord) -> str:
    """The record's message (and traceback) as kept: redacted, storable, at most
    LINE_CHARS characters."""
    try:
        text = record.getMessage()
    except BaseException as exc:  # bad %-arguments, or an argument whose
        # __str__ fails: keep what was logged, and say so
        text = (f"{safe_str(record.msg, 'message', repr)} "
                f"{safe_str(record.args, 'arguments', repr)} "
                f"(could not be formatted: {safe_str(exc, 'exception')})")
    if record.exc_info:
        text = f"{text}\n{logging.Formatter().formatException(record.exc_info)}"
    elif record.exc_text:
        text = f"{text}\n{record.exc_text}"
    whole = len(text)
    text = redact(text[:REDACT_WINDOW])
    if "\x00" in text or not text.isascii():  # most lines are plain ASCII: nothing to do
        text = storable_text(text) or ""
    if whole > LINE_CHARS:
        text = f"{text[:LINE_CHARS]}… [{whole - LINE_CHARS} chars cut]"
    return text


class AttemptLogHandler(logging.Handler):
    """Keeps each record emitted while an attempt is current in that attempt's lines.
    Outside an attempt it returns at once, without the handler's lock or filters.

    A handler on the root logger stops `logging.lastResort` (warnings to stderr when an
    application configured no logging): when it is the only handler a record met, it
    passes the record on to lastResort as logging would have without it."""

    def handle(self, record: logging.LogRecord) -> bool:
        attempt = CURRENT.get()
        if attempt is not None:
            log = attempt.attempt_log()
            if log is not None:
                log.add(record)
        if len(logging.root.handlers) == 1 and _met_no_other_handler(record):
            last = logging.lastResort
            if last is not None and record.levelno >= last.level:
                last.handle(record)
        return attempt is not None

    def emit(self, record: logging.LogRecord) -> None:
        self.handle(record)


def _met_no_other_handler(record: logging.LogRecord) -> bool:
    """Whether no logger between the record's and the root has a handler (the root has
    only this one): logging then found one handler, this, and did not use lastResort."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None and logger is not logging.root:
        if logger.handlers:
            return False
        if not logger.propagate:
            return True  # it never reached this handler; logging used lastResort itself
        logger = logger.parent
    return True


_install_lock = threading.Lock()


def install(logger: logging.Logger | None = None) -> AttemptLogHandler:
    """Add the one AttemptLogHandler to the root logger (or `logger`), unless it has one;
    returns it. The worker calls this as it starts."""
    target = logger or logging.getLogger()
    with _install_lock:
        for handler in target.handlers:
            if isinstance(handler, AttemptLogHandler):
                return handler
        handler = AttemptLogHandler()
        target.addHandler(handler)
        return handler
