"""The completer's write paths build finish_executions' parameters straight off the
Completions (completion_params); everything else builds them from rows as dicts
(finish_params). Both must send the statement the same arrays, value for value and type
for type: plain text for statuses and outcomes, the transitions table's word on each
attempt, one NULL for results when no job returned any."""

from __future__ import annotations

import uuid

import pytest

from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.engine.completer import Completion, completion_params, finish_params


def _c(job_id: int, status: JobStatus, outcome: ExecutionOutcome, **kw) -> Completion:
    return Completion(job_id=job_id, execution_id=uuid.uuid4(), type="t", attempt=1,
                      lease=30.0, status=status, outcome=outcome, **kw)


BATCHES = {
    "completions": [_c(3, JobStatus.COMPLETED, ExecutionOutcome.COMPLETED),
                    _c(1, JobStatus.COMPLETED, ExecutionOutcome.COMPLETED)],
    "every outcome": [
        _c(9, JobStatus.COMPLETED, ExecutionOutcome.COMPLETED, result='{"n":1}'),
        _c(2, JobStatus.PENDING, ExecutionOutcome.RETRY, error_code="E", error="boom",
           delay=4.5, traceback="tb", progress='{"p":1}', checkpoint='{"c":2}'),
        _c(5, JobStatus.FAILED, ExecutionOutcome.FAILED, error_code="X", error="no"),
        _c(4, JobStatus.PENDING, ExecutionOutcome.SNOOZED, delay=60.0),
        _c(7, JobStatus.PENDING, ExecutionOutcome.HANDED_BACK),
        _c(6, JobStatus.PENDING, ExecutionOutcome.WORKER_LOST, lapsed_only=True),
        _c(8, JobStatus.SKIPPED, ExecutionOutcome.SKIPPED),
        _c(1, JobStatus.CANCELLED, ExecutionOutcome.CANCELLED)],
    "one result": [_c(2, JobStatus.COMPLETED, ExecutionOutcome.COMPLETED),
                   _c(1, JobStatus.COMPLETED, ExecutionOutcome.COMPLETED, result="[]")],
    "empty": [],
}


@pytest.mark.parametrize("name", list(BATCHES))
def test_both_builders_send_the_same_arrays(name):
    batch = BATCHES[name]
    fast, rows = completion_params(batch), finish_params([c.row() for c in batch])
    assert fast == rows
    for key, values in fast.items():  # text, not enum members, however they compare
        assert [type(v) for v in values or []] == [type(v) for v in rows[key] or []], key


def test_statuses_and_outcomes_go_as_plain_text():
    params = completion_params(BATCHES["every outcome"])
    assert {type(v) for v in params["statuses"] + params["outcomes"]} == {str}
    assert params["job_ids"] == sorted(params["job_ids"])
    assert params["pending_ids"] == [2, 4, 6, 7]
