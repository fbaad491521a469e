"""How the end of an execution moves its job: one table, read by every way out of `running`.

Each execution ends with one recorded outcome (`job_executions.outcome`). The row of
that outcome says where the job goes next, whether the attempt it used stays spent,
which error code the runtime records (None: the handler's own), and how the rollups
count the move. The runner (a handler's end), recovery (a lost worker) and the
graceful hand-back read it, and all write through one statement (finish_executions, by
`jobwarden.worker.engine.completer.write_batch`), each row carrying the table's facts;
`tests/integration/test_transitions.py` drives every row through the real statements
and checks the job, the execution and the rollups against it, so the rollups' trigger and
rebuild (worker/store/sql/schema/rollups.sql), which spell out `counted_as` in SQL, cannot
drift from it.

One rule is applied by the statements themselves, under the row lock: a job whose
cancellation was requested never goes back to `pending` — it ends `cancelled`, with the
code CANCELLED, whichever way its execution ended.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobwarden.worker.core import errors as E
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S


@dataclass(frozen=True)
class Transition:
    outcome: O
    #: The job's next status; None: back to `pending` while attempts are left, else
    #: `failed` (`final`, the outcome then recorded: a retry that ran out is a failure).
    to: S | None
    #: False: the attempt is given back (the handler never ran to an end of its own).
    attempt_spent: bool = True
    #: The error code the runtime records for it; None: the handler's (or none).
    error_code: str | None = None
    final: O | None = None
    #: How the rollups count a move back to `pending` (None: not at all, no outcome).
    counted_as: str | None = "retried"


TRANSITIONS: dict[O, Transition] = {t.outcome: t for t in (
    Transition(O.COMPLETED, S.COMPLETED),
    Transition(O.RETRY, None, final=O.FAILED),
    Transition(O.FAILED, S.FAILED),
    Transition(O.SKIPPED, S.SKIPPED, error_code="SKIPPED"),
    Transition(O.CANCELLED, S.CANCELLED, error_code=E.CANCELLED),
    Transition(O.UNKNOWN, S.UNKNOWN),
    Transition(O.TIMEOUT, None, error_code=E.TIMEOUT, final=O.TIMEOUT),
    # A lost worker's job is retried like a timeout, except a type that declared itself
    # unsafe to repeat: nobody knows whether its side effect happened (see `lost`).
    Transition(O.WORKER_LOST, None, error_code=E.WORKER_LOST, final=O.WORKER_LOST),
    Transition(O.HANDED_BACK, S.PENDING, attempt_spent=False, counted_as=None),
    # Put off by the handler (`raise Snooze(seconds)`): runs again then, the attempt given
    # back; a type's max_snoozes bounds how often (then SNOOZE_LIMIT fails it).
    Transition(O.SNOOZED, S.PENDING, attempt_spent=False, counted_as="snoozed"),
)}

def next_status(outcome: O, attempt: int, max_attempts: int) -> tuple[S, O]:
    """The job's next status after `outcome` on attempt `attempt` of `max_attempts`, and
    the outcome to record (a retry with no attempt left is recorded as a failure)."""
    t = TRANSITIONS[outcome]
    if t.to is not None:
        return t.to, outcome
    if attempt >= max_attempts:
        return S.FAILED, t.final or outcome
    return S.PENDING, outcome


def lost(attempt: int, max_attempts: int, repeat_safe: bool) -> S:
    """Where recovery moves a job whose worker was lost on attempt `attempt`."""
    status, _ = next_status(O.WORKER_LOST, attempt, max_attempts)
    if status is S.PENDING and not repeat_safe:
        return S.UNKNOWN
    return status


def rollup_outcome(outcome: O, status: S) -> str | None:
    """How job_minute_counts counts an execution that ended with `outcome` and moved its
    job to `status`: the status reached, or for a move back to pending the row's
    `counted_as` (`retried`, `snoozed`; None for a hand-back, which is no outcome)."""
    if status is S.PENDING:
        return TRANSITIONS[outcome].counted_as
    return status.value
