"""The chaos handlers, in a worker that dies right after a claim commits and before the
handler starts, for jobs whose payload asks for it (first attempt only).

The worker has no fault-injection hook of its own: this app wraps Executor.begin, the
step between a committed claim (waiting in the buffer) and the handler.
"""

from __future__ import annotations

from jobwarden.worker.engine.executor import Executor
from tests.apps import chaos_app

_begin = Executor.begin


def _begin_or_die(self, job):
    if job.payload.get("die_after_claim") and job.attempt == 1:
        chaos_app.die()
    return _begin(self, job)


Executor.begin = _begin_or_die
