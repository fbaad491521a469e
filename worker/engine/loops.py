"""A lane's event loop: where its `async def` handlers run (docs/architecture.md §6).

Each lane that gets a coroutine handler's job starts one loop on a thread of its own
(made on the first such job: a lane of thread handlers only never has one). Coroutine
handlers then cost a task each, not a thread, so a lane can hold hundreds in flight.

Nothing that keeps a lease alive runs on the loop: the heartbeat is its own thread, so
a handler that blocks the loop (a `time.sleep`, a synchronous HTTP call) stalls its
lane's coroutines but never its leases. A probe task on the loop notes the time each
time it wakes; the worker's watchdog thread reads how long ago that was (`stalled_for`)
every WATCH_SECONDS, and says so in the worker log once per stall, with where the loop
thread is stuck; the heartbeat reports the worst lag in the worker's row
(`job_workers.loop_lag_ms`, shown on the console's Workers page).

A handler cannot take the loop down: what it raises ends its own job (worker/engine/
runner.py), its `loop.stop()` raises LoopStopRefused into it, and should the loop's run
end anyway (a callback's SystemExit, which asyncio lets through) it is run again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import select
import selectors
import sys
import threading
import time
import traceback
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from psycopg_pool import AsyncConnectionPool, ConnectionPool

log = logging.getLogger("jobwarden.loop")

T = TypeVar("T")

#: How often the probe wakes: the finest stall it can see.
PROBE_INTERVAL = 0.05
#: A loop that has not run its probe for this long is stalled: said in the log and on
#: the Workers page. Far above a busy loop's normal lag (milliseconds), far below a lease.
STALL_SECONDS = 0.5
#: How often the watchdog checks each loop for a stall (and each execution's timeout,
#: worker/engine/watchdog.py): a stall is logged within this of reaching STALL_SECONDS.
WATCH_SECONDS = 0.1


class LoopStopRefused(BaseException):
    """Raised by a lane loop's stop() when a handler calls it: the loop is the lane's,
    not the handler's. A BaseException, so that a handler's `except Exception` does not
    swallow it: its job fails with HANDLER_ABORTED."""


class LaneEventLoop(asyncio.SelectorEventLoop):
    """A selector loop that only the worker may stop (LaneLoop.stop())."""

    stop_allowed = False

    def stop(self) -> None:
        if not self.stop_allowed:
            raise LoopStopRefused("a handler may not stop its lane's event loop")
        super().stop()


class PreciseSelector(selectors.DefaultSelector):
    """The platform's selector (epoll on Linux), waiting out a timeout to the microsecond.

    epoll_wait takes whole milliseconds, and Python rounds a timeout up to the next one
    so as never to wake early. asyncio waits until its next timer is due, so every wait
    of a busy loop overslept by half a millisecond on average, and each coroutine's wake
    with it (bench/README.md@eb7c2f0, "A loop's timers to the microsecond"). Here a positive
    timeout is waited with select() on the epoll descriptor itself, which takes
    microseconds and is readable when an event is; the events are then read without
    waiting. A descriptor select() cannot take (past FD_SETSIZE), or a selector without
    one, waits as it did."""

    _select_ok = hasattr(selectors.DefaultSelector, "fileno")

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout > 0 and self._select_ok:
            try:
                ready, _, _ = select.select([self.fileno()], [], [], timeout)
            except ValueError:  # past FD_SETSIZE: the millisecond wait from now on
                self._select_ok = False
            else:
                if not ready:
                    return []
                timeout = 0
        return super().select(timeout)


class LaneLoop:
    """One event loop on a thread of its own, with its lag probe and, when a handler
    asks for `ctx.transaction()`, a pool of async connections."""

    def __init__(self, name: str, *, sync_pool: ConnectionPool, max_connections: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.loop = LaneEventLoop(PreciseSelector())
        self.thread = threading.Thread(target=self._run, name=f"loop-{name}", daemon=True)
        self._sync_pool = sync_pool
        self._max_connections = max_connections
        self._pool: AsyncConnectionPool | None = None
        self._clock = clock
        self._last_tick = clock()
        self._worst_lag = 0.0  # the worst lag since the heartbeat last read it
        self._stall_logged = False

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        probe = self.loop.create_task(self._probe())
        while True:
            try:
                self.loop.run_forever()
            except BaseException:  # a callback's SystemExit or KeyboardInterrupt
                if not self.loop.stop_allowed:
                    log.exception("lane %s: its event loop was interrupted; running it "
                                  "again", self.name,
                                  extra={"action": "loop_interrupted", "lane": self.name})
            if self.loop.stop_allowed:
                break
        # Stopped: end the probe (tasks left behind, abandoned ones, die with the process).
        probe.cancel()
        self.loop.run_until_complete(asyncio.gather(probe, return_exceptions=True))

    async def _probe(self) -> None:
        while True:
            await asyncio.sleep(PROBE_INTERVAL)
            self.tick()

    def tick(self) -> None:
        """The probe woke: the lag is how late, past the PROBE_INTERVAL it slept."""
        now = self._clock()
        lag = now - self._last_tick - PROBE_INTERVAL
        self._last_tick = now
        if lag > self._worst_lag:
            self._worst_lag = lag

    # -- running coroutines ----------------------------------------------------------
    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[[], Any]) -> None:
        """Run `fn` on the loop's thread (from any thread)."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn)

    async def connection_pool(self) -> AsyncConnectionPool:
        """The async connections of ctx.transaction(), opened on first use (on the loop).
        Same server and settings as the worker's pool."""
        if self._pool is None:
            kw = self._sync_pool.kwargs
            pool = AsyncConnectionPool(
                self._sync_pool.conninfo, min_size=0, max_size=self._max_connections,
                timeout=10, open=False, kwargs=kw() if callable(kw) else dict(kw or {}),
                name=f"jobwarden-loop-{self.name}")
            await pool.open(wait=False)
            self._pool = pool
        return self._pool

    def stop(self, timeout: float = 5.0) -> None:
        """Close the async pool and stop the loop; tasks still on it (abandoned ones)
        are left to die with the process."""
        if not self.thread.is_alive():
            return
        pool, stalled = self._pool, self.stalled_for() >= STALL_SECONDS
        if pool is not None and not stalled:
            try:
                self.submit(pool.close(timeout=timeout)).result(timeout)
            except Exception:  # a stalled loop cannot close it: the process exit will
                log.warning("lane %s: its async connection pool did not close", self.name)
        self.loop.stop_allowed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(0.1 if stalled else timeout)  # a stalled loop does not stop

    # -- stall detection (called from the watchdog and heartbeat threads) --------------
    def stalled_for(self) -> float:
        """Seconds the loop has gone without running its probe past its interval."""
        return max(0.0, self._clock() - self._last_tick - PROBE_INTERVAL)

    def take_lag(self) -> float:
        """The worst lag seen since the last call, the current stall included."""
        worst, self._worst_lag = max(self._worst_lag, self.stalled_for()), 0.0
        return worst

    def where_stuck(self) -> str:
        """The loop thread's innermost frames: the blocking call, when it is stalled."""
        frame = sys._current_frames().get(self.thread.ident or -1)
        if frame is None:
            return "unknown"
        frames = traceback.extract_stack(frame)[-3:]
        return " <- ".join(f"{f.filename}:{f.lineno} {f.name}" for f in reversed(frames))

    def check_stall(self, running: Callable[[], list[int]]) -> None:
        """Log a stall once when it begins and once when it ends. `running`: the ids of
        the jobs on this loop now."""
        stalled = self.stalled_for()
        if stalled >= STALL_SECONDS and not self._stall_logged:
            self._stall_logged = True
            log.warning("lane %s: event loop stalled for %.1fs (a blocking call in a "
                        "coroutine handler?); jobs on it: %s; stuck at %s", self.name,
                        stalled, running() or "none", self.where_stuck(),
                        extra={"action": "loop_stalled", "lane": self.name,
                               "stalled_ms": round(stalled * 1000)})
        elif stalled < STALL_SECONDS and self._stall_logged:
            self._stall_logged = False
            log.warning("lane %s: event loop running again", self.name,
                        extra={"action": "loop_resumed", "lane": self.name})
