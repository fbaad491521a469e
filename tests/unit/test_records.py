"""Records with many fields of like types are built by keyword: a Completion built with
its lease and attempt swapped would still type-check and write the wrong row."""

from __future__ import annotations

import uuid

import pytest

from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.engine.completer import Completion
from jobwarden.worker.engine.runner import Outcome


def test_a_completion_cannot_be_built_by_position():
    with pytest.raises(TypeError):
        Completion(1, uuid.uuid4(), "t", 1, 30.0,  # type: ignore[misc]
                   JobStatus.COMPLETED, ExecutionOutcome.COMPLETED)


def test_a_completion_built_by_keyword_keeps_every_field():
    eid = uuid.uuid4()
    c = Completion(job_id=1, execution_id=eid, type="t", attempt=2, lease=30.0,
                   status=JobStatus.PENDING, outcome=ExecutionOutcome.RETRY,
                   error_code="NETWORK_TIMEOUT", error="slow", delay=4.0, queue="q")
    assert (c.job_id, c.execution_id, c.attempt, c.lease, c.delay, c.queue) == (
        1, eid, 2, 30.0, 4.0, "q")


def test_an_outcome_takes_its_code_and_message_by_keyword():
    with pytest.raises(TypeError):
        Outcome(JobStatus.FAILED, ExecutionOutcome.FAILED, "AUTH_FAILED", "401")  # type: ignore[misc]
    out = Outcome(JobStatus.FAILED, ExecutionOutcome.FAILED, error_code="AUTH_FAILED",
                  error="401")
    assert (out.error_code, out.error) == ("AUTH_FAILED", "401")
