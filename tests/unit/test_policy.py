"""Backoff, jitter and durations: pure logic, no database."""

import random
import statistics

import pytest

from jobwarden.worker.core.policy import RetryPolicy


def test_backoff_doubles_per_attempt_up_to_the_cap():
    policy = RetryPolicy(base=30, cap=600, jitter=0)
    assert [policy.delay_for(a) for a in range(1, 8)] == [30, 60, 120, 240, 480, 600, 600]


def test_huge_attempt_numbers_do_not_overflow():
    assert RetryPolicy(base=1, cap=3600, jitter=0).delay_for(10_000) == 3600


def test_jitter_spreads_retries_within_bounds():
    policy = RetryPolicy(base=60, cap=3600, jitter=0.2)
    rng = random.Random(7)
    delays = [policy.delay_for(1, rng) for _ in range(10_000)]
    assert min(delays) >= 48 and max(delays) <= 72
    # Spread, not a spike: 10,000 simultaneous failures do not come back in one second.
    buckets = {int(d) for d in delays}
    assert len(buckets) >= 20
    assert statistics.pstdev(delays) > 5
    assert abs(statistics.mean(delays) - 60) < 1


def test_zero_jitter_is_exact():
    assert RetryPolicy(base=5, jitter=0).delay_for(3) == 20


@pytest.mark.parametrize("bad", [dict(base=-1), dict(jitter=1.5), dict(cap=-3)])
def test_invalid_policies_are_refused(bad):
    with pytest.raises(ValueError):
        RetryPolicy(**bad)
