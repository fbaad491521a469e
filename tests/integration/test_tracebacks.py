"""Each execution stores the handler's traceback, redacted and capped; the console shows it."""

from __future__ import annotations

import pytest

from jobwarden import PermanentError, RetryableError, RetryPolicy, SkipJob, enqueue, job
from jobwarden.worker.core.sanitize import MAX_TRACEBACK_CHARS, describe_traceback
from tests.helpers import executions, job_row, running_worker, wait_for

FAST = RetryPolicy(base=0.05, cap=0.05, jitter=0)


@pytest.fixture
def reg(default_registry):
    return default_registry


def deep_call(depth: int):
    if depth == 0:
        raise ValueError("charge failed for https://billing:hunter2@pay.example.com")
    deep_call(depth - 1)


def test_a_raised_error_keeps_its_traceback_per_attempt(reg, conn, clean_db, viewer):
    @job("charge", registry=reg, max_attempts=2, backoff=FAST)
    def charge(ctx, payload):
        if ctx.attempt == 1:
            deep_call(3)
        raise PermanentError("CARD_DECLINED", "declined")

    @job("skipper", registry=reg)
    def skipper(ctx, payload):
        raise SkipJob("nothing to do")

    job_id = enqueue(conn, "charge", {})
    skipped = enqueue(conn, "skipper", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, job_id)["status"] == "failed" and
                 job_row(clean_db, skipped)["status"] == "skipped", message="both to settle")
    first, second = executions(clean_db, job_id)
    assert "Traceback (most recent call last)" in first["traceback"]
    assert "in deep_call" in first["traceback"] and "ValueError: charge failed" in first["traceback"]
    assert "hunter2" not in first["traceback"] and "[REDACTED]" in first["traceback"]
    assert "PermanentError" in second["traceback"]
    assert executions(clean_db, skipped)[0]["traceback"] is None  # skipping is no error
    html = viewer.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert 'data-testid="traceback-1"' in html and 'data-testid="traceback-2"' in html
    assert "<details" in html and "hunter2" not in html


def test_a_huge_traceback_keeps_its_head_and_its_innermost_frames():
    try:
        deep_call(3)
    except ValueError as exc:
        wrapped = exc
    try:
        raise RuntimeError("provider answered " + "x" * 20_000) from wrapped
    except RuntimeError as exc:
        text = describe_traceback(exc)
    assert len(text) <= MAX_TRACEBACK_CHARS
    assert text.startswith("Traceback (most recent call last)") and "chars cut" in text
    assert text.rstrip().endswith("x" * 100)  # the exception itself, at the end, is kept


def test_retryable_errors_carry_the_traceback_too(reg, conn, clean_db):
    @job("flaky", registry=reg, max_attempts=1)
    def flaky(ctx, payload):
        raise RetryableError("UPSTREAM_5XX", "502")

    job_id = enqueue(conn, "flaky", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, job_id)["status"] == "failed", message="failed")
    (ex,) = executions(clean_db, job_id)
    assert "RetryableError" in ex["traceback"] and "in flaky" in ex["traceback"]
