"""The seed's scenarios 1-4, 9 and 13 against a real PostgreSQL and a real worker."""

from __future__ import annotations

import pytest

from jobwarden import (
    AmbiguousOutcome,
    PermanentError,
    RateLimited,
    RetryableError,
    RetryPolicy,
    SkipJob,
    enqueue,
    job,
)
from tests.helpers import executions, job_row, running_worker, wait_for

SLOW = RetryPolicy(base=600, cap=600, jitter=0)  # a retry that won't come back during a test
FAST = RetryPolicy(base=0.05, cap=0.05, jitter=0)


@pytest.fixture
def reg(default_registry):
    """The process-wide registry, emptied: enqueue applies the policies registered here."""
    return default_registry


@pytest.fixture
def kind(handler_kind):
    """Each test below runs once with thread handlers and once with coroutine handlers."""
    return handler_kind


def add(conn, type_, payload=None, **kw):
    job_id = enqueue(conn, type_, payload or {}, **kw)
    conn.commit()
    return job_id


def settle(url, job_id, statuses=("completed", "failed", "skipped", "cancelled", "unknown")):
    return wait_for(lambda: (r := job_row(url, job_id))["status"] in statuses and r,
                    message=f"job {job_id} to reach one of {statuses}")


def test_success_completes_after_one_attempt(reg, conn, clean_db, kind):
    """Test 1: PENDING -> RUNNING -> COMPLETED, attempts = 1, completed_at set."""
    seen = []

    @job("ok", registry=reg)
    @kind
    def ok(ctx, payload):
        seen.append((ctx.job_id, ctx.attempt, payload))

    job_id = add(conn, "ok", {"fileId": 4812})
    with running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    assert row["status"] == "completed"
    assert row["attempts"] == 1
    assert row["completed_at"] is not None
    assert seen == [(job_id, 1, {"fileId": 4812})]
    (ex,) = executions(clean_db, job_id)
    assert ex["outcome"] == "completed" and ex["finished_at"] and ex["duration_ms"] >= 0


def test_temporary_error_goes_back_to_pending_with_a_future_available_at(reg, conn, clean_db, kind):
    """Test 2: a provider 503 -> pending, available_at > now, attempts = 1, code stored."""

    @job("flaky", backoff=SLOW, registry=reg)
    @kind
    def flaky(ctx, payload):
        raise RetryableError("PROVIDER_5XX", "503 Service Unavailable")

    job_id = add(conn, "flaky")
    with running_worker(reg, clean_db):
        row = wait_for(lambda: (r := job_row(clean_db, job_id))["attempts"] == 1
                       and r["status"] == "pending" and r, message="the retry to be scheduled")
    assert row["in_future"] and 500 < row["available_in"] <= 600
    assert row["last_error_code"] == "PROVIDER_5XX"
    assert "503" in row["last_error"]
    (ex,) = executions(clean_db, job_id)
    assert (ex["outcome"], ex["error_code"]) == ("retry", "PROVIDER_5XX")


def test_permanent_error_fails_without_retrying(reg, conn, clean_db, kind):
    """Test 3: INVALID_PAYLOAD -> FAILED with no pointless retries."""
    calls = []

    @job("strict", max_attempts=5, registry=reg)
    @kind
    def strict(ctx, payload):
        calls.append(1)
        raise PermanentError("PAYLOAD_INVALID", "email address invalid")

    job_id = add(conn, "strict")
    with running_worker(reg, clean_db):
        # Judged on the first execution's end, not on waiting for `failed`: a permanent
        # error treated as retryable shows here as a retry, at once.
        (first,) = wait_for(lambda: (e := executions(clean_db, job_id))
                            and e[0]["finished_at"] and e, message="the first attempt to end")
        row = job_row(clean_db, job_id)
    assert (first["outcome"], first["error_code"]) == ("failed", "PAYLOAD_INVALID")
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("failed", 1, "PAYLOAD_INVALID")
    assert row["failed_at"] is not None
    assert len(executions(clean_db, job_id)) == 1 and len(calls) == 1


def test_exhausted_retries_end_failed_after_max_attempts(reg, conn, clean_db, kind):
    """Test 4: attempt 1, 2, 3 fail -> FAILED after max_attempts."""

    @job("down", max_attempts=3, backoff=FAST, registry=reg)
    @kind
    def down(ctx, payload):
        raise RetryableError("NETWORK_TIMEOUT", f"attempt {ctx.attempt} timed out")

    job_id = add(conn, "down")
    with running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("failed", 3, "NETWORK_TIMEOUT")
    assert [e["outcome"] for e in executions(clean_db, job_id)] == ["retry", "retry", "failed"]


def test_poison_job_never_circulates_forever(reg, conn, clean_db, kind):
    """Test 9: a job that always crashes with an unexpected error ends FAILED (UNKNOWN),
    and the jobs behind it still complete."""

    @job("poison", max_attempts=4, backoff=FAST, registry=reg)
    @kind
    def poison(ctx, payload):
        raise KeyError("payload['userId']")

    @job("fine", registry=reg)
    @kind
    def fine(ctx, payload):
        pass

    poison_id = add(conn, "poison", priority=10)
    fine_ids = [add(conn, "fine") for _ in range(5)]
    with running_worker(reg, clean_db):
        row = settle(clean_db, poison_id)
        for fid in fine_ids:
            assert settle(clean_db, fid)["status"] == "completed"
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("failed", 4, "UNKNOWN")
    assert "KeyError" in row["last_error"]


def test_v1_payload_is_upgraded_for_a_v2_worker(reg, conn, clean_db, kind):
    """Test 13: a job enqueued as v1 before a release is upgraded, not crash-looped."""
    seen = []

    @job("remind", version=2, registry=reg)
    @kind
    def remind(ctx, payload):
        seen.append(payload)

    @remind.upgrader(from_version=1)
    def v1_to_v2(payload):
        return {"user_id": payload["userId"], "channel": "email"}

    old = add(conn, "remind", {"userId": 52}, version=1)
    new = add(conn, "remind", {"user_id": 7, "channel": "sms"})
    with running_worker(reg, clean_db):
        assert settle(clean_db, old)["status"] == "completed"
        assert settle(clean_db, new)["status"] == "completed"
    assert job_row(clean_db, new)["version"] == 2
    assert sorted(seen, key=lambda p: p["user_id"]) == [
        {"user_id": 7, "channel": "sms"}, {"user_id": 52, "channel": "email"}]


def test_a_version_with_no_upgrade_path_fails_clearly(reg, conn, clean_db, kind):
    @job("remind", version=3, registry=reg)
    @kind
    def remind(ctx, payload):
        raise AssertionError("must not run")

    @remind.upgrader(from_version=2)
    def v2_to_v3(payload):
        return payload

    job_id = add(conn, "remind", {"userId": 52}, version=1)
    with running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert row["last_error_code"] == "PAYLOAD_VERSION_UNSUPPORTED"
    assert "v1" in row["last_error"]


def test_rate_limited_retries_at_exactly_retry_after(reg, conn, clean_db, kind):
    @job("api", backoff=FAST, registry=reg)
    @kind
    def api(ctx, payload):
        raise RateLimited(120)

    job_id = add(conn, "api")
    with running_worker(reg, clean_db):
        row = wait_for(lambda: (r := job_row(clean_db, job_id))["attempts"] == 1
                       and r["status"] == "pending" and r, message="rate-limited retry")
    assert row["last_error_code"] == "RATE_LIMITED"
    assert 115 < row["available_in"] <= 120


def test_skip_and_ambiguous_outcomes(reg, conn, clean_db, kind):
    @job("report", registry=reg)
    @kind
    def report(ctx, payload):
        raise SkipJob("project 1842 was deleted")

    @job("refund", registry=reg)
    @kind
    def refund(ctx, payload):
        raise AmbiguousOutcome("provider timed out after accepting the request")

    skip_id, unknown_id = add(conn, "report"), add(conn, "refund")
    with running_worker(reg, clean_db):
        skipped = settle(clean_db, skip_id)
        unknown = settle(clean_db, unknown_id)
    assert (skipped["status"], skipped["skipped_at"] is not None) == ("skipped", True)
    assert "deleted" in skipped["last_error"]
    assert (unknown["status"], unknown["last_error_code"]) == ("unknown", "AMBIGUOUS_OUTCOME")


def test_secrets_never_reach_stored_errors(reg, conn, clean_db, kind):
    @job("leaky", max_attempts=1, registry=reg)
    @kind
    def leaky(ctx, payload):
        raise RuntimeError(
            "POST https://svc:hunter2@api.example.com/v1?api_key=sk_live_abcdefghijklmnop "
            "with headers {'Authorization': 'Bearer eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl'} "
            "password=swordfish")

    job_id = add(conn, "leaky")
    with running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    stored = [row["last_error"]] + [e["error"] for e in executions(clean_db, job_id)]
    for text in stored:
        for secret in ("hunter2", "sk_live_abcdefghijklmnop", "eyJhbGciOi", "swordfish"):
            assert secret not in text
        assert "[REDACTED]" in text and "api.example.com" in text


def test_long_errors_are_truncated(reg, conn, clean_db, kind):
    @job("verbose", max_attempts=1, registry=reg)
    @kind
    def verbose(ctx, payload):
        raise RuntimeError("x" * 100_000)

    job_id = add(conn, "verbose")
    with running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    assert len(row["last_error"]) <= 2000 and "chars cut" in row["last_error"]


@pytest.mark.parametrize("handler", ["thread", "coroutine"])
def test_business_writes_commit_with_completion(reg, conn, clean_db, handler):
    conn.execute("CREATE TABLE invoices (order_id int PRIMARY KEY)")
    conn.commit()

    if handler == "thread":
        @job("invoice", registry=reg)
        def invoice(ctx, payload):
            with ctx.transaction() as tx:
                tx.execute("INSERT INTO invoices VALUES (%s) ON CONFLICT DO NOTHING",
                           [payload["order_id"]])
    else:
        @job("invoice", registry=reg)
        async def invoice_async(ctx, payload):
            async with ctx.transaction() as tx:  # a psycopg AsyncConnection
                await tx.execute("INSERT INTO invoices VALUES (%s) ON CONFLICT DO NOTHING",
                                 [payload["order_id"]])

    job_id = add(conn, "invoice", {"order_id": 9})
    with running_worker(reg, clean_db):
        assert settle(clean_db, job_id)["status"] == "completed"
    assert conn.execute("SELECT count(*) FROM invoices").fetchone()[0] == 1
