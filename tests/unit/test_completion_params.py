"""The completer's write paths build finish_executions' parameters straight off the
Completions (completion_params); everything else builds them from rows as dicts
(finish_params). Both must give the statement the same arrays, value for value: the
ids, words, numbers and flags as array text (worker/store/arrays.py), read back here as
the server reads it; free text as lists, or one NULL when no row has a value (unnest
pads it to every row, as it does a short array)."""

from __future__ import annotations

import uuid

import pytest

from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.engine.completer import Completion, completion_params, finish_params
from jobwarden.worker.store.arrays import uuid_array, word

#: How the server reads each array sent as text (None: sent as a list).
READ = {"job_ids": int, "execution_ids": uuid.UUID, "statuses": str, "outcomes": str,
        "delays": float, "attempts_spent": lambda t: {"t": True, "f": False}[t],
        "lapsed_only": lambda t: {"t": True, "f": False}[t], "pending_ids": int}


def read(key: str, value):
    """A parameter as the statement gets it: array text parsed, a NULL as all NULLs."""
    if isinstance(value, str):
        inner = value[1:-1]
        return [None if t == "NULL" else READ[key](t) for t in inner.split(",")] if inner else []
    return value


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
    assert fast.keys() == rows.keys()
    for key, value in fast.items():
        got, want = read(key, value), rows[key]
        if got is None:  # one NULL: only for an array with no value in it
            assert not isinstance(value, str) and all(v is None for v in want or []), key
            continue
        assert got == want, key
        assert [type(v) for v in got] == [type(v) for v in want], key  # text, not enums


def test_the_ids_words_and_flags_go_as_array_text():
    params = completion_params(BATCHES["every outcome"])
    assert params["job_ids"] == "{1,2,4,5,6,7,8,9}"
    assert params["pending_ids"] == "{2,4,6,7}"
    assert params["lapsed_only"] == "{f,f,f,f,t,f,f,f}"
    assert params["outcomes"] == ("{cancelled,retry,snoozed,failed,worker_lost,handed_back,"
                                  "skipped,completed}")
    # Free text stays a list for psycopg to quote.
    assert params["errors"] == [None, "boom", None, "no", None, None, None, None]


def test_a_batch_without_free_text_sends_none_of_it():
    params = completion_params(BATCHES["completions"])
    assert [k for k, v in params.items() if v is None] == [
        "error_codes", "errors", "progress", "checkpoints", "tracebacks", "results"]


def test_a_uuid_goes_as_hex_and_a_text_id_is_read_as_one():
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert uuid_array([u, u]) == "{12345678123456781234567812345678,12345678123456781234567812345678}"
    assert uuid_array([str(u)]) == "{12345678123456781234567812345678}"
    with pytest.raises(ValueError):
        uuid_array(["not-a-uuid"])


@pytest.mark.parametrize("bad", ["", "a,b", "a b", "{x}", 'q"', "é", "NULL", "null"])
def test_a_word_that_would_need_quoting_is_refused(bad):
    with pytest.raises(ValueError):
        word(bad)
