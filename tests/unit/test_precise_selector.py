"""The lane loop's selector: epoll's events, with timeouts waited to the microsecond
(worker/engine/loops.py, PreciseSelector). The rate it buys is measured in bench/, not
here; these check that it loses no event and waits out every timeout."""

from __future__ import annotations

import asyncio
import os
import resource
import selectors
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from jobwarden.worker.engine.loops import LaneLoop, PreciseSelector

#: select()'s limit: a descriptor at or past it cannot be waited on with select().
FD_SETSIZE = 1024


@contextmanager
def registered_pair(sel: selectors.BaseSelector) -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    sel.register(a, selectors.EVENT_READ, "a")
    try:
        yield a, b
    finally:
        sel.unregister(a)
        a.close()
        b.close()


def check_events_and_timeouts(sel: PreciseSelector) -> None:
    with registered_pair(sel) as (a, b):
        started = time.monotonic()
        assert sel.select(0.003) == []  # nothing ready: the timeout is waited out...
        assert time.monotonic() - started >= 0.003
        b.send(b"x")
        started = time.monotonic()
        ready = sel.select(30)  # ...and an event ends the wait at once, reported as epoll has it
        assert time.monotonic() - started < 30
        assert [(key.data, events) for key, events in ready] == [("a", selectors.EVENT_READ)]
        assert [(key.data, events) for key, events in sel.select(0)] == [
            ("a", selectors.EVENT_READ)]  # not consumed: level-triggered, as before
        a.recv(1)
        assert sel.select(0) == []


def test_it_reports_what_epoll_reports_and_waits_out_each_timeout():
    with PreciseSelector() as sel:
        assert sel.fileno() < FD_SETSIZE
        check_events_and_timeouts(sel)
        assert sel._select_ok  # the microsecond wait was the one used


def test_an_epoll_descriptor_past_fd_setsize_falls_back_to_the_millisecond_wait():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= FD_SETSIZE + 64, f"the test needs {FD_SETSIZE + 64} descriptors (hard {hard})"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, FD_SETSIZE + 64), hard))
    fillers: list[int] = []
    try:
        while not fillers or fillers[-1] < FD_SETSIZE:  # the next descriptor is past it
            fillers.append(os.open(os.devnull, os.O_RDONLY))
        with PreciseSelector() as sel:
            assert sel.fileno() >= FD_SETSIZE
            check_events_and_timeouts(sel)
            assert not sel._select_ok  # select() refused it: epoll's own wait took over
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_lane_loop_runs_on_it():
    lane = LaneLoop("t", sync_pool=None, max_connections=1)  # type: ignore[arg-type]
    assert isinstance(lane.loop, asyncio.SelectorEventLoop)
    assert isinstance(lane.loop._selector, PreciseSelector)  # type: ignore[attr-defined]
    lane.start()
    try:
        async def nap() -> str:
            await asyncio.sleep(0.002)
            return "woke"
        assert lane.submit(nap()).result(timeout=10) == "woke"
    finally:
        lane.stop()
