"""Retention of flows and batches: edges go with their jobs, a parent stays while a
dependent of it has not ended, and a batch goes once it has ended, none of its members
is left, no callback job of it is unfinished, and it is old enough.

Real data through the real statements (enqueue, open_batch, the finish statement and
its counts, an operator's cancel), aged by moving its moments back; then retention's
pass (run_once), as the duty runs it. Each rule with a case on each side of it.
"""

from __future__ import annotations

import psycopg
import pytest

from jobwarden import EnqueueError, JobSpec, Registry, enqueue, job, open_batch
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties import retention
from jobwarden.worker.duties.retention import DAY, RetentionPolicy, count_prunable, run_once
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.ops import operations as ops

REG = Registry()
job("step", queue="q", lease=30, max_attempts=1, registry=REG)(lambda ctx, payload: None)
job("done", queue="q", lease=30, max_attempts=1, registry=REG)(lambda ctx, payload: None)

CALLBACKS = {"on_complete": JobSpec("done", {}), "on_success": JobSpec("done", {}),
             "on_failure": JobSpec("done", {})}


def add(conn, after=None, **kw) -> int:
    return enqueue(conn, "step", {}, after=after, registry=REG, **kw)


def run(conn, job_id: int, outcome: O = O.COMPLETED) -> None:
    """Claim the job (only it) and write its outcome through the finish statement, which
    releases its dependents and counts it in its batch."""
    execution = conn.execute(
        "UPDATE background_jobs SET status = 'running', execution_id = gen_random_uuid(), "
        "attempts = attempts + 1, worker_id = 'w', started_at = now(), heartbeat_at = now(), "
        "lease_seconds = 30, lease_expires_at = now() + interval '30 seconds' "
        "WHERE id = %s AND status = 'pending' RETURNING execution_id", [job_id]).fetchone()
    assert execution, f"job {job_id} is not pending"
    to = {O.COMPLETED: S.COMPLETED, O.FAILED: S.FAILED, O.UNKNOWN: S.UNKNOWN}[outcome]
    assert write_batch(conn, [Completion(
        job_id=job_id, execution_id=execution[0], type="step", attempt=1,
        lease=30, status=to, outcome=outcome, queue="q")])
    conn.commit()


def age_jobs(conn, ids: list[int], days: float) -> None:
    """Every moment of these jobs `days` earlier."""
    conn.execute("""
        UPDATE background_jobs SET created_at = created_at - make_interval(days => %(d)s),
            completed_at = completed_at - make_interval(days => %(d)s),
            failed_at = failed_at - make_interval(days => %(d)s),
            cancelled_at = cancelled_at - make_interval(days => %(d)s),
            skipped_at = skipped_at - make_interval(days => %(d)s)
        WHERE id = ANY(%(ids)s)""", {"d": days, "ids": ids})
    conn.commit()


def age_batch(conn, batch_id: int, days: float) -> None:
    """Every moment of this batch `days` earlier."""
    conn.execute("""
        UPDATE job_batches SET created_at = created_at - make_interval(days => %(d)s),
            closed_at = closed_at - make_interval(days => %(d)s),
            failure_at = failure_at - make_interval(days => %(d)s),
            complete_at = complete_at - make_interval(days => %(d)s),
            success_at = success_at - make_interval(days => %(d)s)
        WHERE id = %(id)s""", {"d": days, "id": batch_id})
    conn.commit()


def jobs(conn) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM background_jobs").fetchall()}


def edges(conn) -> set[tuple[int, int]]:
    return set(conn.execute("SELECT job_id, parent_id FROM job_dependencies").fetchall())


def batches(conn) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM job_batches").fetchall()}


def callback_rows(conn) -> set[int]:
    return {r[0] for r in conn.execute("SELECT batch_id FROM job_batch_callbacks").fetchall()}


def callback_jobs(conn, batch_id: int) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT job_id FROM job_batch_callbacks WHERE batch_id = %s AND job_id IS NOT NULL "
        "ORDER BY job_id", [batch_id]).fetchall()]


def prune(conn) -> None:
    """One pass of the default policy, as the duty runs it."""
    assert run_once(conn, RetentionPolicy(), drop_history=False) is not None


# -- flows -------------------------------------------------------------------------------

def test_a_parent_stays_while_a_dependent_has_not_ended_and_edges_go_with_jobs(conn):
    done, failed = add(conn), add(conn)
    held = add(conn, after=[done, failed])  # released by one, held by the other
    parent = add(conn)
    child = add(conn, after=[parent])       # both old: both go
    older = add(conn)
    young = add(conn, after=[older])        # the parent old, its dependent young: it goes
    conn.commit()
    for job_id in (done, parent, child, older, young):
        run(conn, job_id)
    run(conn, failed, O.FAILED)
    age_jobs(conn, [done, parent, child, older], 20)  # past completed's 14 days
    age_jobs(conn, [failed], 100)                     # past failed's 90 days
    prune(conn)
    # The held job keeps both its parents (and they their edges): it shows what holds
    # it, and a retry of the failed one resumes the flow with the other's result.
    assert jobs(conn) == {done, failed, held, young}
    assert edges(conn) == {(held, done), (held, failed)}
    assert conn.execute("SELECT status, waiting_on FROM background_jobs WHERE id = %s",
                        [held]).fetchone() == ("waiting", 1)
    # Once the operator ends the held job, its parents go on the next pass.
    assert ops.cancel_job(conn, held, actor="ops", role="operator", reason="gave up").ok
    conn.commit()
    prune(conn)
    assert jobs(conn) == {held, young}
    assert edges(conn) == set()


def test_prune_counts_what_it_would_delete_keeping_the_same_parents(conn):
    parent = add(conn)
    held = add(conn, after=[parent, add(conn)])  # its other parent never runs
    conn.commit()
    run(conn, parent)
    age_jobs(conn, [parent], 20)
    assert count_prunable(conn, ["completed"], 14 * DAY) == {"completed": 0}
    assert held in jobs(conn)


# -- batches ----------------------------------------------------------------------------

def opened(conn, members: int, **callbacks) -> tuple[int, list[int]]:
    with open_batch(conn, description="import", registry=REG, **callbacks) as b:
        ids = b.enqueue_many([JobSpec("step", {"n": n}) for n in range(members)])
    conn.commit()
    return b.id, ids


def left_open(conn) -> int:
    """A batch whose opener raised and committed anyway: open for good, no member."""
    with pytest.raises(RuntimeError):  # noqa: PT012
        with open_batch(conn, description="raised", registry=REG) as b:
            raise RuntimeError("the opener failed")
    conn.commit()
    return b.id


def test_an_ended_batch_goes_with_its_last_member_and_not_before(conn):
    # Every member completed 20 days ago: one pass takes them, the callbacks' jobs
    # (completed then too) and, after them, the batch with its callbacks.
    gone, gone_members = opened(conn, 2, **CALLBACKS)
    # A member failed 20 days ago: kept 90 days, and the batch with it.
    kept, kept_members = opened(conn, 2, **CALLBACKS)
    for member in gone_members + kept_members[:1]:
        run(conn, member)
    run(conn, kept_members[1], O.FAILED)
    callbacks = callback_jobs(conn, gone) + callback_jobs(conn, kept)
    assert len(callbacks) == 4  # complete and success; complete and failure
    for callback in callbacks:
        run(conn, callback)
    age_jobs(conn, gone_members + kept_members + callbacks, 20)
    age_batch(conn, gone, 20)
    age_batch(conn, kept, 20)
    prune(conn)
    assert batches(conn) == callback_rows(conn) == {kept}
    assert jobs(conn) == {kept_members[1]}
    # Once the failed member goes, the batch follows it in the same pass.
    age_jobs(conn, kept_members[1:], 80)
    prune(conn)
    assert batches(conn) == callback_rows(conn) == jobs(conn) == set()


def test_a_batch_stays_while_a_callback_job_is_unfinished(conn):
    batch, members = opened(conn, 1, **CALLBACKS)
    run(conn, members[0])
    age_jobs(conn, members, 20)
    age_batch(conn, batch, 20)
    prune(conn)  # its member goes; its two callbacks have not run yet
    assert batches(conn) == {batch}
    complete, success = callback_jobs(conn, batch)
    run(conn, complete)
    prune(conn)
    assert batches(conn) == {batch}  # `success` is still pending
    run(conn, success)
    prune(conn)  # finished callback jobs (young: they stay) hold no batch
    assert batches(conn) == set()
    assert jobs(conn) == {complete, success}


@pytest.mark.parametrize("days, stays", [(13, True), (15, False)])
def test_an_ended_batch_is_kept_as_long_as_the_shortest_job_age(conn, days, stays):
    batch, _ = opened(conn, 0)  # no member: closed, complete and successful at once
    age_batch(conn, batch, days)
    prune(conn)
    assert (batches(conn) == {batch}) is stays


@pytest.mark.parametrize("days, stays", [(0, True), (13, True), (15, False)])
def test_an_open_batch_with_no_member_goes_only_once_old(conn, days, stays):
    batch = left_open(conn)
    age_batch(conn, batch, days)
    prune(conn)
    assert (batches(conn) == {batch}) is stays


def test_a_batch_with_a_member_counted_unknown_stays_until_it_ends(conn):
    batch, members = opened(conn, 1, **CALLBACKS)
    run(conn, members[0], O.UNKNOWN)
    age_jobs(conn, members, 200)
    age_batch(conn, batch, 200)
    prune(conn)  # an unknown job is never deleted: its batch waits for it
    assert batches(conn) == {batch}


@pytest.mark.parametrize("older_than_days, stays", [(9, True), (7, False)])
def test_prune_takes_the_batches_it_empties_by_its_own_age(conn, older_than_days, stays):
    batch, members = opened(conn, 1)
    run(conn, members[0])
    age_jobs(conn, members, 8)
    age_batch(conn, batch, 8)
    assert retention.prune(conn, ["completed"], older_than_days * DAY) == {
        "completed": 0 if stays else 1}
    assert (batches(conn) == {batch}) is stays


def test_a_batch_an_enqueue_is_joining_is_left_alone(clean_db):
    with psycopg.connect(clean_db) as conn:
        batch = left_open(conn)
        age_batch(conn, batch, 20)
        with psycopg.connect(clean_db) as joining:
            member = enqueue(joining, "step", {}, batch=batch, registry=REG)  # uncommitted
            prune(conn)  # the batch's row is locked: skipped
            joining.commit()
        prune(conn)  # it has a member now
        assert batches(conn) == {batch} and member in jobs(conn)
        # Once its member ended and went, the batch goes, and an enqueue into it is
        # refused, nothing written.
        run(conn, member)
        age_jobs(conn, [member], 20)
        prune(conn)
        assert batches(conn) == set()
        with pytest.raises(EnqueueError, match="batch"):
            enqueue(conn, "step", {}, batch=batch, registry=REG)
        conn.rollback()
        assert jobs(conn) == set()
