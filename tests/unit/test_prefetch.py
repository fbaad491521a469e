"""How far ahead of its free slots the producer claims (Producer.ahead / wanted).

Pure arithmetic on the producer's inputs: no connection is opened."""

import threading

import pytest

from worker.engine.listener import Wakeup
from worker.engine.producer import ClaimSpec, JobBuffer, Producer, ProducerSettings


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
