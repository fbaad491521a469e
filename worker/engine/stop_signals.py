"""SIGTERM and SIGINT that arrive while a worker starts.

The worker's own handlers (WorkerProcess.run: a first signal drains, a second stops) are
installed once its runtime, its app and its configuration have loaded: 200-300 ms after
the spawn, longer with a large app. A signal before that killed the process (-15, or a
KeyboardInterrupt's traceback), though it held nothing yet. A deploy that stops a worker
it has just started, or a supervisor's restart, meets that window.

`hold()` puts a recorder in their place from the command's first line (both entry
points: jobwarden/command.py, and worker/cli/__main__.py for `python -m`), and the worker
asks `take()` once its own handlers are in: a signal recorded stops it before it
registers, with status 0 and one log line, as one after it did. Every other command
`release()`s them: the default handlers return, and a signal recorded is sent again, so
`jobwarden migrate` ends on SIGTERM as it always did. A second signal while the worker
still loads does the same at once: an app whose import hangs can still be stopped.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)

_asked: list[int] = []
_previous: dict[int, Any] = {}


def _record(signum: int, _frame: object) -> None:
    again = bool(_asked)
    _asked.append(signum)
    if again:
        # A second stop while still loading (an import that hangs, Ctrl-C pressed again):
        # the signals act as they did before anything was held, at once.
        release()


def hold() -> None:
    """Record SIGTERM and SIGINT from now on, until `take` or `release` (the main
    thread only, where Python runs signal handlers)."""
    if _previous or threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        _previous[signum] = signal.signal(signum, _record)


def take() -> bool:
    """Whether a stop was asked while held. The caller has put its own handlers in."""
    _previous.clear()
    asked = bool(_asked)
    _asked.clear()
    return asked


def release() -> None:
    """Put the handlers back as they were and send a signal that came while held again."""
    if not _previous:
        return
    for signum, handler in _previous.items():
        signal.signal(signum, handler)
    _previous.clear()
    last = _asked[-1] if _asked else None
    _asked.clear()
    if last is not None:
        os.kill(os.getpid(), last)
