"""`@job(concurrency_limit=N)`: a positive integer, one by default."""

import pytest

from jobwarden.worker.jobs.registry import MAX_CONCURRENCY_LIMIT, Registry, job


def declare(**policy):
    return job("sync", registry=Registry(), **policy)(lambda ctx, payload: None)


def test_a_type_runs_one_job_per_key_unless_it_says_otherwise():
    assert declare().concurrency_limit == 1
    assert declare(concurrency_limit=3).concurrency_limit == 3
    assert declare(concurrency_limit=MAX_CONCURRENCY_LIMIT).concurrency_limit == 1000


@pytest.mark.parametrize("limit", [0, -1, True, 2.0, "2", None, MAX_CONCURRENCY_LIMIT + 1])
def test_a_limit_that_is_not_a_small_positive_integer_is_refused(limit):
    with pytest.raises(ValueError, match="concurrency_limit must be an integer from 1 to 1000"):
        declare(concurrency_limit=limit)
