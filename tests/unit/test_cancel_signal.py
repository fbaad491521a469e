"""The cancel signal of one execution: a flag, with an Event made only for a waiter. A
handler waiting in ctx.wait_cancelled() wakes when the signal comes, whether it began
waiting before or after; a handler that never waits costs no Event."""

from __future__ import annotations

import threading
import time
import uuid

from jobwarden.worker.engine.context import ExecutionControl


def control() -> ExecutionControl:
    return ExecutionControl(pool=None, job_id=1, execution_id=uuid.uuid4(), attempt=1,  # type: ignore[arg-type]
                            max_attempts=3, type="t", queue="default", version=1)


def test_a_waiter_wakes_when_cancelled_later():
    run = control()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(run.wait_cancelled(30)))
    waiter.start()
    # Until the waiter has made its Event and waits on it (a deadline, not a fixed sleep).
    deadline = time.monotonic() + 10
    while run._cancel_event is None:
        assert time.monotonic() < deadline, "the waiter never began to wait"
        time.sleep(0.001)
    started = time.monotonic()
    run.time_out()
    waiter.join(10)
    assert woke == [True] and time.monotonic() - started < 10
    assert run.cancel_requested and run.timed_out


def test_a_signal_before_the_wait_returns_at_once_and_without_an_event():
    run = control()
    run.cancel_by_operator()
    assert run.wait_cancelled(30) is True
    assert run._cancel_event is None


def test_no_signal_means_the_wait_runs_out_and_nothing_is_requested():
    run = control()
    assert run.cancel_requested is False
    assert run.wait_cancelled(0.01) is False
    assert run.cancel_requested is False


def test_the_first_signal_alone_cancels_a_task():
    run = control()
    calls: list[int] = []
    run.on_cancel = lambda: calls.append(1)
    run.request_cancel()
    run.time_out()
    assert calls == [1]
