"""The watchdog duty: every WATCH_SECONDS (0.1 s) it enforces each lane's execution
timeouts and checks each lane's event loop for a stall, on a thread of its own.

Neither waits for the heartbeat, whose interval is a third of the shortest lease (10 s
for a 30 s lease): a timeout is noticed within WATCH_SECONDS of its deadline (the
handler is asked to stop, a coroutine's task cancelled), abandoned within WATCH_SECONDS
of its grace (docs/faults-handlers.md), and a lane loop's stall is logged
once, however short, as soon as it passes STALL_SECONDS (worker/engine/loops.py). It
touches no database: an outage does not hold it up.
"""

from __future__ import annotations

import logging
import threading

from jobwarden.worker.engine.executor import Executor
from jobwarden.worker.engine.loops import WATCH_SECONDS

log = logging.getLogger("jobwarden.watchdog")


class Watchdog:
    """Enforces timeouts and watches the lane loops of `executors` (one per lane)."""

    def __init__(self, executors: list[Executor], interval: float = WATCH_SECONDS) -> None:
        self.executors = executors
        self.interval = interval

    def run(self, closing: threading.Event) -> None:
        while not closing.wait(self.interval):
            self.check()

    def check(self) -> None:
        for executor in self.executors:
            try:
                executor.enforce_timeouts()
                executor.watch_loop()
            except Exception:  # a bug here must not end the watch of every lane
                log.exception("watchdog error (lane %s)", executor.name)
