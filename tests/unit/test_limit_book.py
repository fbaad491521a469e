"""LimitBook.for_lane runs before every claim: with nothing limited anywhere it answers
without building a limited claim (worker/engine/limits.py)."""

from __future__ import annotations

import pytest

from jobwarden.worker.engine.limits import Control, LimitBook
from jobwarden.worker.jobs.registry import JobType


class Untouchable:
    """A lock that fails the test when taken: for_lane had to look at the limits."""

    def __enter__(self) -> None:
        pytest.fail("for_lane read the limits although nothing is limited")

    def __exit__(self, *exc: object) -> None:
        pass


def _type(name: str, **limits) -> JobType:
    return JobType(name=name, handler=lambda ctx, p: None, **limits)


def test_with_nothing_declared_or_set_for_lane_answers_without_reading_the_limits():
    book = LimitBook([_type("a"), _type("b", concurrency_limit=2)])
    book._lock = Untouchable()  # type: ignore[assignment]
    assert book.for_lane(lambda queue: True) is None


def test_a_declared_rate_or_a_live_control_is_still_read():
    declared = LimitBook([_type("a", rate_limit=5.0)])
    limited = declared.for_lane(lambda queue: True)
    assert limited is not None and limited.types == ["a"]
    live = LimitBook([_type("a")])
    live.set_controls([Control("queue", "default", 3, None, None)])
    limited = live.for_lane(lambda queue: True)
    assert limited is not None and limited.queues == ["default"]
    live.set_controls([])
    assert live.for_lane(lambda queue: True) is None
