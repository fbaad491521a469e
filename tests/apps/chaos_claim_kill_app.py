"""The chaos handlers, in a worker that dies right after a claim commits and before the
handler starts, for jobs whose payload asks for it (first attempt only).

The worker has no fault-injection hook of its own: this app wraps WorkerProcess._start,
the step between the committed claim and the handler thread.
"""

from __future__ import annotations

from tests.apps import chaos_app
from worker.process import WorkerProcess

_start = WorkerProcess._start


def _start_or_die(self, row):
    payload, attempts = row[4], row[6]
    if payload.get("die_after_claim") and attempts == 1:
        chaos_app.die()
    return _start(self, row)


WorkerProcess._start = _start_or_die
