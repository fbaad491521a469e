"""A lane's free slots (worker/engine/producer.py, Slots): a count that every job takes
and gives back, never above the lane's size, and a wait for one that a release ends."""

from __future__ import annotations

import threading

import pytest

from jobwarden.worker.engine.producer import Slots


def test_it_hands_out_as_many_slots_as_it_has():
    slots = Slots(2)
    assert slots.acquire(blocking=False) and slots.acquire(blocking=False)
    assert not slots.acquire(blocking=False)
    assert not slots.acquire(timeout=0.01)
    slots.release()
    assert slots.acquire(blocking=False)
    assert not slots.acquire(blocking=False)


def test_a_slot_given_back_that_was_never_taken_is_refused():
    slots = Slots(1)
    with pytest.raises(ValueError, match="released too many times"):
        slots.release()
    assert slots.acquire(blocking=False)
    slots.release()
    with pytest.raises(ValueError, match="released too many times"):
        slots.release()
    assert slots.acquire(blocking=False)
    assert not slots.acquire(blocking=False)


@pytest.mark.parametrize("timeout", [None, 60.0])
def test_a_thread_waiting_for_a_slot_gets_the_one_given_back(timeout):
    slots = Slots(1)
    assert slots.acquire()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire(timeout=timeout)))
    waiter.start()
    while not slots._waiting:  # the waiter waits for a slot now
        threading.Event().wait(0.001)
    slots.release()
    waiter.join(60)
    assert got == [True]
    assert not slots.acquire(blocking=False)  # the waiter holds it
