"""The producer's Wakeup (worker/engine/listener.py): an Event that a thread can also wait
for together with a socket."""

from __future__ import annotations

import os
import resource
import select
import socket
import threading

import pytest

from jobwarden.worker.engine.listener import Wakeup


def test_a_set_from_another_thread_ends_a_wait_on_a_socket():
    wake, (a, b) = Wakeup(), socket.socketpair()
    try:
        woken: list[bool] = []
        waiter = threading.Thread(target=lambda: woken.append(wake.wait(600.0, a.fileno())))
        waiter.start()
        wake.set()
        waiter.join(timeout=30)  # a deadline, far from the 600 s the wait would take
        assert not waiter.is_alive(), "set() did not end the wait"
        assert woken == [False]  # woken, the socket not readable
        assert wake.is_set()
        wake.clear()
        b.send(b"x")
        assert wake.wait(30.0, a.fileno()) is True  # the socket, not the wake-up
        assert not wake.is_set()
    finally:
        wake.close()
        a.close()
        b.close()


def test_a_wait_on_a_descriptor_past_select_s_limit():
    """A worker with many connections has descriptors above FD_SETSIZE (1024), where
    select() refuses to wait."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = 1500
    if soft <= high:
        pytest.fail(f"RLIMIT_NOFILE {soft} is too low for this test")
    wake, (a, b) = Wakeup(), socket.socketpair()
    os.dup2(a.fileno(), high)
    try:
        b.send(b"x")
        assert wake.wait(30.0, high) is True
    finally:
        os.close(high)
        wake.close()
        a.close()
        b.close()


def test_while_set_its_pipe_is_readable_and_once_cleared_it_is_not():
    """What lets a set() from any thread end a poll() already under way, whenever it
    comes: the pipe holds a byte exactly while the wake-up is set."""
    wake, (a, b) = Wakeup(), socket.socketpair()
    try:
        assert wake.wait(0.0, a.fileno()) is False  # the first wait on a socket makes it
        assert wake._pipe is not None
        r = wake._pipe[0]
        assert select.select([r], [], [], 0)[0] == []
        wake.set()
        wake.set()  # twice: still one wake-up
        assert select.select([r], [], [], 0)[0] == [r]
        wake.clear()
        assert select.select([r], [], [], 0)[0] == []
        assert not wake.is_set()
    finally:
        wake.close()
        a.close()
        b.close()
