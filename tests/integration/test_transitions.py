"""Every row of the transitions table, driven through the statements that end executions.

For each way an execution ends — a handler's outcome written by finish_executions, a
graceful hand-back, a lost worker's recovery — with attempts left and without, and with
a cancel requested: the job's status, attempts and code, the execution's recorded
outcome, and the rollups' count are what worker/core/transitions.py says. A rebuild of the
rollups from those records then gives what the trigger counted live.
"""

from __future__ import annotations

import pytest

from jobwarden import Registry, RetryPolicy, enqueue, job
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.core.transitions import TRANSITIONS, lost, next_status, rollup_outcome
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine import completer
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import ClaimedJob, claim
from jobwarden.worker.engine.runner import Outcome, ended, retry_or_fail

LATER = RetryPolicy(base=3600, cap=3600, jitter=0)


def registry(repeat_safe: bool = True) -> Registry:
    reg = Registry()
    job("t", queue="q", lease=30, max_attempts=2, backoff=LATER, repeat_safe=repeat_safe,
        registry=reg)(lambda ctx, payload: None)
    return reg


def start(conn, reg: Registry, *, last_attempt: bool, cancel: bool = False) -> ClaimedJob:
    """One job claimed on its first or its last (second) attempt, as a worker claims it."""
    job_id = enqueue(conn, "t", {}, registry=reg)
    if last_attempt:
        conn.execute("UPDATE background_jobs SET attempts = 1 WHERE id = %s", [job_id])
    # Only this job is runnable (an earlier one handed back would be claimed first).
    conn.execute("UPDATE background_jobs SET available_at = now() + interval '1 day' "
                 "WHERE status = 'pending' AND id <> %s", [job_id])
    conn.commit()
    (claimed,) = claim(conn, types=["t"], leases=[30.0], queues=None, limit=1, worker_id="w")
    assert claimed.id == job_id
    if cancel:
        conn.execute("UPDATE background_jobs SET cancel_requested_at = now() WHERE id = %s",
                     [job_id])
    conn.commit()
    return claimed


def finish(conn, j: ClaimedJob, outcome: Outcome) -> None:
    assert write_batch(conn, [Completion(
        job_id=j.id, execution_id=j.execution_id, type=j.type, attempt=j.attempt, lease=30,
        status=outcome.status, outcome=outcome.outcome, error_code=outcome.error_code,
        error=outcome.error, delay=outcome.delay, queue=j.queue)])
    conn.commit()


def hand_back(conn, j: ClaimedJob) -> None:
    assert completer.hand_back(conn, [(j, None, None)]) == {j.id}
    conn.commit()


def lose(conn, j: ClaimedJob, reg: Registry) -> None:
    conn.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 s' "
                 "WHERE id = %s", [j.id])
    conn.commit()
    assert sum(recover_stale_running(conn, reg).values()) == 1
    conn.commit()


def handler_ends(outcome: O, last_attempt: bool) -> Outcome:
    """The Outcome the runner builds for a handler ending with `outcome`."""
    if TRANSITIONS[outcome].to is None:
        return retry_or_fail(None, 2 if last_attempt else 1, 2, "E_HANDLER", "it raised",
                             outcome=outcome)
    if outcome is O.SNOOZED:
        return ended(outcome, None, None, delay=60)
    return ended(outcome, "E_HANDLER" if outcome in (O.FAILED, O.UNKNOWN) else None, "ended")


def record(conn, j: ClaimedJob) -> tuple:
    return conn.execute("""
        SELECT b.status, b.attempts, b.last_error_code, e.outcome
        FROM background_jobs b JOIN job_executions e ON e.execution_id = %s
        WHERE b.id = %s""", [j.execution_id, j.id]).fetchone()


def minute_counts(conn) -> dict[tuple, int]:
    return {(o, c): n for o, c, n in conn.execute(
        "SELECT outcome, error_code, sum(jobs)::int FROM job_minute_counts "
        "GROUP BY 1, 2 HAVING sum(jobs) <> 0")}


HANDLER_ENDS = [(o, last) for o in (O.COMPLETED, O.RETRY, O.FAILED, O.SKIPPED, O.CANCELLED,
                                    O.UNKNOWN, O.TIMEOUT, O.SNOOZED) for last in (False, True)]


@pytest.mark.parametrize("outcome, last_attempt", HANDLER_ENDS)
def test_a_handlers_end_moves_the_job_as_the_table_says(conn, clean_db, outcome, last_attempt):
    reg = registry()
    j = start(conn, reg, last_attempt=last_attempt)
    given = handler_ends(outcome, last_attempt)
    finish(conn, j, given)
    status, recorded = next_status(outcome, j.attempt, 2)
    assert (given.status, given.outcome) == (status, recorded)
    # The code: the table's (SKIPPED, CANCELLED) or the handler's.
    code = TRANSITIONS[outcome].error_code if TRANSITIONS[outcome].to else None
    assert given.error_code == (code or ("E_HANDLER" if outcome not in (
        O.COMPLETED, O.SKIPPED, O.CANCELLED, O.SNOOZED) else None))
    attempts = j.attempt if TRANSITIONS[outcome].attempt_spent else j.attempt - 1
    assert record(conn, j) == (status, attempts, given.error_code, recorded)
    category = rollup_outcome(recorded, status)
    counted_code = (given.error_code or "") if category in ("failed", "unknown", "retried") \
        else ""
    assert minute_counts(conn) == {(category, counted_code): 1}


#: What each handler end leaves, written out rather than read from the table it checks
#: (so a wrong row of TRANSITIONS shows here): (outcome, last attempt) -> the job's status,
#: its attempts, its code, the execution's recorded outcome and the rollup's (outcome, code).
EXPECTED_ENDS = {
    (O.COMPLETED, False): ("completed", 1, None, "completed", ("completed", "")),
    (O.COMPLETED, True): ("completed", 2, None, "completed", ("completed", "")),
    (O.RETRY, False): ("pending", 1, "E_HANDLER", "retry", ("retried", "E_HANDLER")),
    (O.RETRY, True): ("failed", 2, "E_HANDLER", "failed", ("failed", "E_HANDLER")),
    (O.FAILED, False): ("failed", 1, "E_HANDLER", "failed", ("failed", "E_HANDLER")),
    (O.FAILED, True): ("failed", 2, "E_HANDLER", "failed", ("failed", "E_HANDLER")),
    (O.SKIPPED, False): ("skipped", 1, "SKIPPED", "skipped", ("skipped", "")),
    (O.SKIPPED, True): ("skipped", 2, "SKIPPED", "skipped", ("skipped", "")),
    (O.CANCELLED, False): ("cancelled", 1, "CANCELLED", "cancelled", ("cancelled", "")),
    (O.CANCELLED, True): ("cancelled", 2, "CANCELLED", "cancelled", ("cancelled", "")),
    (O.UNKNOWN, False): ("unknown", 1, "E_HANDLER", "unknown", ("unknown", "E_HANDLER")),
    (O.UNKNOWN, True): ("unknown", 2, "E_HANDLER", "unknown", ("unknown", "E_HANDLER")),
    (O.TIMEOUT, False): ("pending", 1, "E_HANDLER", "timeout", ("retried", "E_HANDLER")),
    (O.TIMEOUT, True): ("failed", 2, "E_HANDLER", "timeout", ("failed", "E_HANDLER")),
    (O.SNOOZED, False): ("pending", 0, None, "snoozed", ("snoozed", "")),
    (O.SNOOZED, True): ("pending", 1, None, "snoozed", ("snoozed", "")),
}


@pytest.mark.parametrize("outcome, last_attempt", HANDLER_ENDS)
def test_a_handlers_end_leaves_the_job_and_counts_as_written_out(conn, clean_db, outcome,
                                                                 last_attempt):
    """The same ends as above against literal expectations: a cancelled execution's code
    is CANCELLED because this says so, not because the table agrees with itself."""
    assert set(EXPECTED_ENDS) == set(HANDLER_ENDS)
    j = start(conn, registry(), last_attempt=last_attempt)
    finish(conn, j, handler_ends(outcome, last_attempt))
    status, attempts, code, recorded, counted = EXPECTED_ENDS[(outcome, last_attempt)]
    assert record(conn, j) == (status, attempts, code, recorded)
    assert minute_counts(conn) == {counted: 1}


def test_a_hand_back_gives_the_attempt_back_and_is_no_outcome(conn, clean_db):
    reg = registry()
    j = start(conn, reg, last_attempt=True)
    hand_back(conn, j)
    assert TRANSITIONS[O.HANDED_BACK].attempt_spent is False
    assert record(conn, j) == (S.PENDING, j.attempt - 1, None, O.HANDED_BACK)
    assert rollup_outcome(O.HANDED_BACK, S.PENDING) is None
    assert minute_counts(conn) == {}


@pytest.mark.parametrize("last_attempt, repeat_safe", [(False, True), (True, True),
                                                       (False, False)])
def test_a_lost_workers_job_moves_as_the_table_says(conn, clean_db, last_attempt, repeat_safe):
    reg = registry(repeat_safe)
    j = start(conn, reg, last_attempt=last_attempt)
    lose(conn, j, reg)
    status = lost(j.attempt, 2, repeat_safe)
    assert status == {(False, True): S.PENDING, (True, True): S.FAILED,
                      (False, False): S.UNKNOWN}[(last_attempt, repeat_safe)]
    assert record(conn, j) == (status, j.attempt, "WORKER_LOST", O.WORKER_LOST)
    assert minute_counts(conn) == {(rollup_outcome(O.WORKER_LOST, status), "WORKER_LOST"): 1}


@pytest.mark.parametrize("way", ["retry", "hand_back", "lost"])
def test_a_requested_cancel_ends_the_job_cancelled_with_one_code_whichever_the_way(
        conn, clean_db, way):
    """A job whose cancellation was requested never goes back to pending: every way out
    of running ends it cancelled, with the code CANCELLED, counted once as cancelled."""
    reg = registry()
    j = start(conn, reg, last_attempt=False, cancel=True)
    if way == "retry":
        finish(conn, j, handler_ends(O.RETRY, last_attempt=False))
    elif way == "hand_back":
        hand_back(conn, j)
    else:
        lose(conn, j, reg)
    status, _attempts, code, recorded = record(conn, j)
    assert (status, code) == (S.CANCELLED, "CANCELLED")
    # How the execution ended: a handler's retry and a hand-back became the cancellation;
    # a lost worker stays what it was.
    assert recorded == (O.WORKER_LOST if way == "lost" else O.CANCELLED)
    assert minute_counts(conn) == {("cancelled", ""): 1}


def test_a_rebuild_counts_every_transition_as_the_trigger_did(conn, clean_db):
    reg, unsafe = registry(), registry(repeat_safe=False)
    for outcome, last_attempt in HANDLER_ENDS:
        finish(conn, start(conn, reg, last_attempt=last_attempt),
               handler_ends(outcome, last_attempt))
    hand_back(conn, start(conn, reg, last_attempt=False))
    hand_back(conn, start(conn, reg, last_attempt=False, cancel=True))
    for last_attempt in (False, True):
        lose(conn, start(conn, reg, last_attempt=last_attempt), reg)
    lose(conn, start(conn, unsafe, last_attempt=False), unsafe)
    live = minute_counts(conn)
    assert sum(live.values()) == len(HANDLER_ENDS) + 1 + 3
    conn.execute("SELECT jobwarden_rollup_rebuild()")
    conn.commit()
    assert minute_counts(conn) == live


#: Every (status, recorded outcome) an execution's end can leave: each row of the table on
#: a first and a last attempt, and a lost worker's job that is not safe to repeat.
ENDS = sorted({next_status(o, attempt, 2) for o in TRANSITIONS for attempt in (1, 2)}
              | {(lost(1, 2, repeat_safe=False), O.WORKER_LOST)})


@pytest.mark.parametrize("status, recorded", ENDS)
def test_the_rollups_count_each_end_by_the_tables_rollup_column(conn, clean_db, status,
                                                                 recorded):
    """The trigger and the rebuild (worker/store/sql/schema/rollups.sql) spell out how a
    move back to pending counts (`snoozed`, no outcome for a hand-back, else `retried`):
    here a running job is moved by hand with its execution recorded as each row says, and
    the count must be the table's `counted_as` — edit either side alone and this fails."""
    conn.execute("""
        WITH j AS (
            INSERT INTO background_jobs (type, queue, payload, status, attempts, execution_id,
                                         worker_id, started_at, lease_expires_at,
                                         last_error_code)
            VALUES ('t', 'q', '{}', 'running', 1, gen_random_uuid(), 'w', now(),
                    now() + interval '30 seconds', 'E_CODE')
            RETURNING id, execution_id)
        INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                                    scheduled_at, started_at, finished_at, outcome,
                                    error_code)
        SELECT id, execution_id, 1, 'q', 't', 'w', now(), now(), now(), %s, 'E_CODE'
        FROM j""",
                 [recorded.value])
    conn.execute("UPDATE background_jobs SET status = %s, lease_expires_at = NULL",
                 [status.value])
    conn.commit()
    category = rollup_outcome(recorded, status)
    code = "E_CODE" if category in ("failed", "unknown", "retried") else ""
    expected = {} if category is None else {(category, code): 1}
    assert minute_counts(conn) == expected
    conn.execute("SELECT jobwarden_rollup_rebuild()")
    conn.commit()
    assert minute_counts(conn) == expected
