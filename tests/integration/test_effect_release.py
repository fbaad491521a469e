"""effect.release(): a reservation the handler drops (the effect certainly did not happen)
leaves the key free, so the next attempt reserves it again instead of parking the job."""

from __future__ import annotations

from jobwarden import RetryableError, RetryPolicy, enqueue, job
from tests.helpers import executions, job_row, running_worker, scalar, wait_for


def test_a_released_effect_is_reserved_again_by_the_next_attempt(conn, clean_db,
                                                                  default_registry):
    @job("sync_contact", max_attempts=3, backoff=RetryPolicy(base=0.05, cap=0.05, jitter=0))
    def sync_contact(ctx, payload):
        effect = ctx.effect("contact:7")
        if ctx.attempt == 1:
            effect.release()  # the provider answered 503: nothing was created
            raise RetryableError("CRM_UNAVAILABLE", "503")
        effect.complete({"contact": 7})

    job_id = enqueue(conn, "sync_contact", {})
    conn.commit()
    with running_worker(default_registry, clean_db):
        wait_for(lambda: job_row(clean_db, job_id)["status"] in ("completed", "unknown"))

    assert [e["error_code"] for e in executions(clean_db, job_id)] == ["CRM_UNAVAILABLE", None]
    assert job_row(clean_db, job_id)["status"] == "completed"
    assert scalar(clean_db, "SELECT state FROM processed_effects WHERE key = 'contact:7'") == "done"
