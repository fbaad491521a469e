"""A worker whose own thread dies: tests/chaos/test_handler_faults.py starts it to see
the worker exit non-zero, so that a supervisor (`Restart=on-failure`) starts it again.

Job `faults.kill_thread` names the thread, and a patch here makes the worker's own code
on that thread raise SystemExit (which Python's threads drop without a word):
- "slot": right after the handler returns, on the thread that ran it (a slot thread, or
  a producer's, which runs jobs too);
- "heartbeat": in the heartbeat's next beat.
"""

from __future__ import annotations

import threading

from jobwarden import job
from jobwarden.worker.engine.executor import Executor
from jobwarden.worker.engine.heartbeat import Heartbeat
from tests.apps import handler_faults_app
from tests.apps.chaos_app import FAST, note

#: The thread asked to die, once the job has run.
doomed: set[str] = set()
_lock = threading.Lock()


def _dies_here(thread: str) -> bool:
    with _lock:
        if thread in doomed:
            doomed.discard(thread)
            return True
    return False


@job("faults.kill_thread", queue=handler_faults_app.QUEUE, lease=1, timeout=30,
     max_attempts=1, backoff=FAST)
def kill_thread_job(ctx, payload):
    note(ctx, "started")
    with _lock:
        doomed.add(payload["thread"])


_keeps = Executor._keeps
_beat = Heartbeat.beat


def _keeps_or_die(self, ex, outcome):  # type: ignore[no-untyped-def]
    if ex.job.type == "faults.kill_thread" and _dies_here("slot"):
        raise SystemExit(0)
    return _keeps(self, ex, outcome)


def _beat_or_die(self):  # type: ignore[no-untyped-def]
    if _dies_here("heartbeat"):
        raise SystemExit(0)
    return _beat(self)


Executor._keeps = _keeps_or_die  # type: ignore[method-assign]
Heartbeat.beat = _beat_or_die  # type: ignore[method-assign]
