"""The worker's lease clock: a lease is vouched for only inside lease × (1 − MARGIN)."""

from jobwarden.worker.core import lease


def test_a_lease_is_vouched_for_until_two_thirds_of_it_have_passed():
    assert lease.vouched(100.0, 3.0, at=100.0)
    assert lease.vouched(100.0, 3.0, at=101.99)
    assert not lease.vouched(100.0, 3.0, at=102.0)
    assert not lease.vouched(100.0, 3.0, at=160.0)  # woken from a minute's freeze


def test_a_lease_never_granted_is_never_vouched_for():
    assert not lease.vouched(None, 60.0)


def test_the_lease_clock_never_goes_back():
    readings = [lease.now() for _ in range(1000)]
    assert readings == sorted(readings)
    assert lease.vouched(lease.now(), 60.0)
