"""How a handler's ending maps to the job's next state (no database)."""

import pytest

from jobwarden.worker.core import errors as E
from jobwarden.worker.core.policy import RetryPolicy
from jobwarden.worker.engine.context import ExecutionControl
from jobwarden.worker.engine.runner import classify, prepare_payload
from jobwarden.worker.jobs.registry import JobType, Registry, job


def ctx(attempt=1, max_attempts=3):
    return ExecutionControl(pool=None, job_id=1, execution_id=None, attempt=attempt,
                            max_attempts=max_attempts, type="t", queue="default", version=1)


JT = JobType("t", handler=lambda c, p: None, backoff=RetryPolicy(base=10, jitter=0), timeout=5)


@pytest.mark.parametrize("exc, status, code", [
    (None, "completed", None),
    (E.PermanentError("AUTH_FAILED", "401"), "failed", "AUTH_FAILED"),
    (E.RetryableError("PROVIDER_5XX", "503"), "pending", "PROVIDER_5XX"),
    (E.SkipJob("gone"), "skipped", "SKIPPED"),
    (E.AmbiguousOutcome("lost response"), "unknown", "AMBIGUOUS_OUTCOME"),
    (E.JobCancelled(), "cancelled", "CANCELLED"),
    (ZeroDivisionError("x"), "pending", "UNKNOWN"),
])
def test_each_ending_has_one_next_state(exc, status, code):
    out = classify(exc, ctx(), JT)
    assert (out.status, out.error_code) == (status, code)


def test_retryable_on_the_last_attempt_fails():
    out = classify(E.RetryableError("NETWORK_TIMEOUT", "t"), ctx(attempt=3), JT)
    assert (out.status, out.outcome) == ("failed", "failed")
    assert "giving up" in out.error


def test_backoff_uses_the_type_policy_and_rate_limit_its_own_time():
    assert classify(E.RetryableError(), ctx(attempt=2), JT).delay == 20
    assert classify(E.RateLimited(120), ctx(attempt=2), JT).delay == 120


def test_timeout_wins_over_whatever_the_handler_raised():
    c = ctx()
    c.timed_out = True
    out = classify(E.JobCancelled(), c, JT)
    assert (out.status, out.outcome, out.error_code) == ("pending", "timeout", "TIMEOUT")


class OwnBase(BaseException):
    pass


@pytest.mark.parametrize("exc", [SystemExit(0), KeyboardInterrupt(), GeneratorExit(),
                                 OwnBase("mine")])
def test_what_is_not_an_exception_is_the_jobs_failure_with_its_own_code(exc):
    out = classify(exc, ctx(), JT)
    assert (out.status, out.outcome, out.error_code) == ("pending", "retry", E.HANDLER_ABORTED)
    assert type(exc).__name__ in out.error and out.traceback
    last = classify(exc, ctx(attempt=3), JT)
    assert (last.status, last.error_code) == ("failed", E.HANDLER_ABORTED)


def test_an_ending_past_the_deadline_is_a_timeout_and_one_before_it_is_not():
    before = ExecutionControl(pool=None, job_id=1, execution_id=None, attempt=1,
                              max_attempts=3, type="t", queue="default", version=1,
                              timeout=60)
    assert classify(None, before, JT).status == "completed"
    past = ExecutionControl(pool=None, job_id=1, execution_id=None, attempt=1,
                            max_attempts=3, type="t", queue="default", version=1,
                            timeout=1, started=before.started - 2)  # its deadline passed
    assert not past.timed_out  # the watchdog has not seen it yet
    out = classify(None, past, JT)
    assert (out.status, out.outcome, out.error_code) == ("pending", "timeout", "TIMEOUT")


def test_payload_upgrades_chain_and_missing_steps_fail_permanently():
    reg = Registry()

    @job("x", version=3, registry=reg)
    def x(c, p):
        pass

    x.upgrader(1)(lambda p: {**p, "v2": True})
    x.upgrader(2)(lambda p: {**p, "v3": True})
    assert prepare_payload(x, {"a": 1}, 1) == {"a": 1, "v2": True, "v3": True}
    del x.upgraders[1]
    with pytest.raises(E.PermanentError) as err:
        prepare_payload(x, {}, 1)
    assert err.value.code == "PAYLOAD_VERSION_UNSUPPORTED"
    with pytest.raises(E.RetryableError) as newer:
        prepare_payload(x, {}, 4)
    assert newer.value.code == "PAYLOAD_VERSION_UNSUPPORTED"


@pytest.mark.parametrize("put_off", [E.RateLimited, E.Snooze])
def test_a_put_off_of_no_sensible_length_is_refused_alike_by_rate_limited_and_snooze(
        put_off):
    """NaN or infinity passed a `< 0` check and made a retry time PostgreSQL could not
    store: the job failed for good (OUTCOME_UNSTORABLE) with attempts left."""
    for bad in (-0.001, float("nan"), float("inf"), float("-inf"),
                E.MAX_PUT_OFF_SECONDS + 0.001):
        with pytest.raises(ValueError, match=f"^{put_off.__name__} takes 0 to "):
            put_off(bad)
    for good in (0, 0.5, E.MAX_PUT_OFF_SECONDS):
        put_off(good)
    assert classify(E.RateLimited(E.MAX_PUT_OFF_SECONDS), ctx(attempt=1), JT).delay == (
        E.MAX_PUT_OFF_SECONDS)
