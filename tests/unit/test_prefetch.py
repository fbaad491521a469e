"""How far ahead of its free slots the producer claims (Producer.ahead / wanted).

Pure arithmetic on the producer's inputs, and its end: no connection is opened."""

import threading

import pytest

from jobwarden.worker.engine.listener import Wakeup
from jobwarden.worker.engine.producer import ClaimSpec, JobBuffer, Producer, ProducerSettings
from jobwarden.worker.store.db import DedicatedConnection


def producer(*, seconds, running=0, waiting=0, concurrency=10, buffer_size=400):
    buffer = JobBuffer()
    buffer.put([object()] * waiting)  # type: ignore[list-item]
    return Producer(conn=None, claims=ClaimSpec(types=["t"], leases=[60.0], worker_id="w"),
                    buffer=buffer, concurrency=concurrency, running=lambda: running,
                    job_seconds=lambda: seconds,
                    settings=ProducerSettings(buffer_size=buffer_size),
                    wake=Wakeup(), stop=threading.Event())


def test_until_durations_are_known_it_claims_only_for_free_slots():
    assert producer(seconds=None).ahead() == 0
    assert producer(seconds=None, running=3).wanted() == 7
    assert producer(seconds=None, running=10).wanted() == 0


@pytest.mark.parametrize("seconds", [1.5, 60.0, 3600.0])
def test_long_jobs_are_never_held_in_the_buffer(seconds):
    # A job held here would wait for this worker's slot while another worker idles.
    assert producer(seconds=seconds).ahead() == 0
    assert producer(seconds=seconds, running=10).wanted() == 0
    assert producer(seconds=seconds, running=8).wanted() == 2


def test_short_jobs_keep_about_a_tenth_of_a_second_of_work_waiting():
    assert producer(seconds=0.01).ahead() == 100   # 10 slots x 0.1 s / 10 ms
    assert producer(seconds=0.0001).ahead() == 400  # capped by the buffer size
    # A buffer more than half full while every slot is busy: let it drain first.
    assert producer(seconds=0.01, running=10, waiting=60).wanted() == 0
    assert producer(seconds=0.01, running=10, waiting=20).wanted() == 80


class _NoSlots:
    """A runner that lends no slot (the producer claims as without one)."""

    def take_slot_for(self, job):
        return False

    def begin_in_slot(self, job):
        raise AssertionError("never begun: no slot was taken")

    def run_begun(self, ex):
        raise AssertionError("never run")


def test_a_producer_stopped_before_its_threads_start_still_ends_its_claiming():
    """Its two claiming threads see the stop when they first take the role: the first
    ends the claiming, and run() returns (no claim is made: the database is never asked)."""
    stop = threading.Event()
    stop.set()
    p = Producer(conn=DedicatedConnection("postgresql://nowhere.invalid/none"),
                 claims=ClaimSpec(types=["t"], leases=[60.0], worker_id="w"),
                 buffer=JobBuffer(), concurrency=2, running=lambda: 0,
                 job_seconds=lambda: None, wake=Wakeup(), stop=stop, runner=_NoSlots())
    done = threading.Thread(target=p.run, daemon=True)
    done.start()
    done.join(timeout=10)
    assert not done.is_alive()
