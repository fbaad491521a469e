"""The seed's Tests 6 and 7 with a real crash: the worker is killed with SIGKILL
between the external effect and the job's completion, the job runs again, and the
business effect still happens exactly once (effect ledger, stable idempotency key, and
a business transaction that commits together with the completion)."""

from __future__ import annotations

import psycopg
import pytest

from tests.chaos.support import add, events, outcomes, settle
from tests.helpers import scalar, wait_for

pytestmark = pytest.mark.chaos


def provider_objects(url: str, job_id: int) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT object_id, calls FROM chaos_provider WHERE job_id = %s",
                            [job_id]).fetchall()


def orders(url: str, job_id: int) -> int:
    return scalar(url, "SELECT count(*) FROM chaos_orders WHERE job_id = %s", [job_id])


def run_once_killed(workers, url: str, payload: dict, app: str) -> tuple[int, dict]:
    a = workers.start(app)
    job_id = add(url, "chaos.charge", payload)
    wait_for(lambda: not a.alive(), message="the worker to die inside the handler")
    workers.start(app)
    return job_id, settle(url, job_id)


def test_crash_after_a_successful_effect_does_not_repeat_the_business_effect(
        workers, chaos_db, handler_app):
    """Test 6: the charge went through and the ledger recorded it; the worker dies before
    the completion commits. The retry finds the effect done and does not charge again."""
    job_id, row = run_once_killed(workers, chaos_db,
                                  {"amount": 42, "die": "before_completion"}, handler_app)
    assert (row["status"], row["attempts"]) == ("completed", 2)
    assert outcomes(chaos_db, job_id) == ["worker_lost", "completed"]
    assert len(events(chaos_db, job_id)) == 2  # it really ran twice
    [(object_id, calls)] = provider_objects(chaos_db, job_id)
    assert calls == 1  # the provider was asked once
    assert orders(chaos_db, job_id) == 1  # the first order rolled back with the crash
    assert scalar(chaos_db, "SELECT result->>'object_id' FROM processed_effects "
                            "WHERE job_id = %s AND state = 'done'", [job_id]) == str(object_id)


def test_retry_with_the_same_idempotency_key_makes_one_external_object(
        workers, chaos_db, handler_app):
    """Test 7: the provider acted, the worker died before the ledger heard of it. The
    provider dedupes by idempotency key, so the retry calls it again with the same key
    and gets the same object back."""
    job_id, row = run_once_killed(workers, chaos_db, {
        "amount": 42, "die": "after_provider", "provider_idempotent": True}, handler_app)
    assert (row["status"], row["attempts"]) == ("completed", 2)
    [(_object_id, calls)] = provider_objects(chaos_db, job_id)
    assert calls == 2  # called on both attempts, with one key: one object
    assert orders(chaos_db, job_id) == 1


def test_an_effect_of_unknown_outcome_is_parked_for_review_not_repeated(
        workers, chaos_db, handler_app):
    """Same crash with a provider that does not dedupe: nobody knows whether the charge
    happened, so the job goes to `unknown` instead of charging again."""
    job_id, row = run_once_killed(workers, chaos_db, {"amount": 42, "die": "after_provider"},
                                  handler_app)
    assert (row["status"], row["attempts"], row["last_error_code"]) == \
        ("unknown", 2, "AMBIGUOUS_OUTCOME")
    [(_object_id, calls)] = provider_objects(chaos_db, job_id)
    assert calls == 1
    assert orders(chaos_db, job_id) == 0
