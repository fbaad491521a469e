"""Job types with a pydantic payload model: refused at enqueue, validated before running."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from jobwarden import EnqueueError, Registry, enqueue, job
from tests.helpers import executions, job_row, running_worker, scalar, wait_for


class SendEmail(BaseModel):
    user_id: int
    template: str = Field(min_length=1)


@pytest.fixture
def reg():
    reg = Registry()
    seen = []

    @job("send_email", payload=SendEmail, max_attempts=5, registry=reg)
    def send_email(ctx, payload):
        seen.append(payload)

    reg.seen = seen
    return reg


def test_the_handler_receives_the_validated_model(reg, conn, clean_db):
    job_id = enqueue(conn, "send_email", SendEmail(user_id=52, template="welcome"),
                     registry=reg)
    conn.commit()
    assert job_row(clean_db, job_id)["payload"] == {"user_id": 52, "template": "welcome"}
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, job_id)["status"] == "completed")
    assert reg.seen == [SendEmail(user_id=52, template="welcome")]


def test_a_payload_that_does_not_fit_is_refused_at_enqueue(reg, conn, clean_db):
    with pytest.raises(EnqueueError) as err:
        enqueue(conn, "send_email", {"user_id": "fifty-two", "template": "",
                                     "password": "hunter2"}, registry=reg)
    message = str(err.value)
    assert "does not fit SendEmail" in message
    assert "user_id" in message and "template" in message
    assert "fifty-two" not in message and "hunter2" not in message  # values are not echoed
    conn.commit()
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


def test_a_bad_payload_from_another_producer_fails_at_once_without_retries(reg, conn, clean_db):
    # A producer that does not import the handlers cannot validate: the worker does.
    job_id = enqueue(conn, "send_email", {"userId": 52}, max_attempts=5)
    conn.commit()
    with running_worker(reg, clean_db):
        row = wait_for(lambda: (r := job_row(clean_db, job_id))["status"] == "failed" and r)
    assert (row["attempts"], row["last_error_code"]) == (1, "PAYLOAD_INVALID")
    assert "user_id: Field required" in row["last_error"]
    assert [e["outcome"] for e in executions(clean_db, job_id)] == ["failed"]
    assert reg.seen == []


def test_only_pydantic_models_are_accepted_as_payload_declarations():
    with pytest.raises(ValueError, match="pydantic model"):
        job("x", payload=dict, registry=Registry())


@pytest.mark.parametrize("payload, why", [
    ('{"a": ' + "[" * 3000 + "]" * 3000 + "}", "is nested deeper than the worker can read"),
    ('{"a": ' + "7" * 5000 + "}", "holds an integer of more digits than the worker reads"),
], ids=["deep", "digits"])
def test_a_payload_python_cannot_read_fails_its_job_alone(reg, conn, clean_db, payload, why):
    """PostgreSQL takes a jsonb value thousands of levels deep, or with a number of
    thousands of digits, from any client (enqueue refuses both); Python's json module
    reads neither. The claim that carries one goes on (worker/store/jobstore.py,
    UnreadableJson): that job fails, the jobs claimed with it run, and the producer lives
    (it died on the claim, and the worker with it, at every claim of the job)."""
    enqueue(conn, "send_email", {"user_id": 1, "template": "a"}, registry=reg)
    bad = conn.execute(
        "INSERT INTO background_jobs (queue, type, payload) VALUES ('default', 'send_email', "
        "%s::jsonb) RETURNING id", [payload]).fetchone()[0]
    enqueue(conn, "send_email", {"user_id": 2, "template": "b"}, registry=reg)
    conn.commit()
    statuses = "SELECT array_agg(status ORDER BY id) FROM background_jobs"  # no payload
    with running_worker(reg, clean_db):
        wait_for(lambda: scalar(clean_db, statuses) == ["completed", "failed", "completed"],
                 timeout=30)
    attempts, code, error = scalar(clean_db, "SELECT ARRAY[attempts::text, last_error_code, "
                                             "last_error] FROM background_jobs WHERE id = %s",
                                   [bad])
    assert (attempts, code) == ("1", "PAYLOAD_INVALID")
    assert error == f"the payload ({len(payload):,} characters of JSON) {why}"
    assert sorted(p.user_id for p in reg.seen) == [1, 2]
