"""Flows: a job enqueued `after` its parents waits until every one has completed.

Driven through the real statements: enqueue_many's, the finish statement every way out
of `running` writes through (write_batch), the operators' actions, the repair duty.
The races run on real connections in threads, their order forced by row locks.
"""

from __future__ import annotations

import inspect
import threading
import uuid

import psycopg
import pytest

from jobwarden import At, Dep, EnqueueError, JobSpec, Registry, enqueue, enqueue_many, job
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties import flows as flow_duty
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.ops import operations as ops
from tests.helpers import job_row, running_worker, wait_for

REG = Registry()
job("step", queue="q", lease=30, max_attempts=1, registry=REG)(lambda ctx, payload: None)


def add(conn, after=None, **kw) -> int:
    return enqueue(conn, "step", {}, after=after, registry=REG, **kw)


def status(conn, job_id: int) -> str:
    return conn.execute("SELECT status FROM background_jobs WHERE id = %s",
                        [job_id]).fetchone()[0]


def start(conn, job_id: int) -> uuid.UUID:
    """The job running, as a claim leaves it (only this one: others stay where they are)."""
    row = conn.execute(
        "UPDATE background_jobs SET status = 'running', execution_id = gen_random_uuid(), "
        "attempts = attempts + 1, worker_id = 'w', started_at = now(), heartbeat_at = now(), "
        "lease_seconds = 30, lease_expires_at = now() + interval '30 seconds' "
        "WHERE id = %s AND status = 'pending' RETURNING execution_id", [job_id]).fetchone()
    assert row, f"job {job_id} is not pending"
    return row[0]


def finish(conn, job_id: int, execution_id: uuid.UUID, outcome: O = O.COMPLETED,
           result: str | None = None) -> dict:
    to = {O.COMPLETED: S.COMPLETED, O.FAILED: S.FAILED, O.UNKNOWN: S.UNKNOWN,
          O.SKIPPED: S.SKIPPED, O.CANCELLED: S.CANCELLED}[outcome]
    return write_batch(conn, [Completion(
        job_id=job_id, execution_id=execution_id, type="step", attempt=1, lease=30,
        status=to, outcome=outcome, queue="q", result=result)])


def run(conn, job_id: int, outcome: O = O.COMPLETED, result: str | None = None) -> None:
    assert finish(conn, job_id, start(conn, job_id), outcome, result)
    conn.commit()


def act(conn, fn, job_id, **kw):
    result = fn(conn, job_id, actor="ops", role="operator", reason="test", **kw)
    conn.commit()
    assert result.ok, result.message
    return result


# -- enqueue ---------------------------------------------------------------------------

def test_a_dependent_waits_is_never_claimed_and_runs_once_its_parent_completed(conn):
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    assert status(conn, child) == "waiting"
    claimed = claim(conn, types=["step"], leases=[30.0], queues=None, limit=10, worker_id="w")
    conn.commit()
    assert [c.id for c in claimed] == [parent]  # the waiting child is not claimable
    assert finish(conn, parent, claimed[0].execution_id)
    conn.commit()
    assert status(conn, child) == "pending"
    assert conn.execute("SELECT waiting_on FROM background_jobs WHERE id = %s",
                        [child]).fetchone()[0] == 0


def test_a_graph_in_one_call_by_key_and_position_and_a_completed_parent(conn):
    done = add(conn)
    run(conn, done)
    ids = enqueue_many(conn, [
        JobSpec("step", {}, key="import"),
        JobSpec("step", {}, after=["import", done]),        # by key, and a completed job
        JobSpec("step", {}, after=[At(0), At(1)]),          # by position: a diamond's end
        JobSpec("step", {}, after=[done]),                  # every parent completed
    ], registry=REG)
    conn.commit()
    assert [status(conn, i) for i in ids] == ["pending", "waiting", "waiting", "pending"]
    waiting_on = dict(conn.execute("SELECT id, waiting_on FROM background_jobs "
                                   "WHERE id = ANY(%s)", [ids]).fetchall())
    assert waiting_on[ids[1]] == 1 and waiting_on[ids[2]] == 2
    run(conn, ids[0])
    assert [status(conn, i) for i in ids[1:3]] == ["pending", "waiting"]
    run(conn, ids[1])
    assert status(conn, ids[2]) == "pending"


@pytest.mark.parametrize("specs, message", [
    ([JobSpec("step", {}, key="a", after=["b"]), JobSpec("step", {}, key="b", after=["a"])],
     "cycle"),
    ([JobSpec("step", {}, after=[At(0)])], "cycle"),
    ([JobSpec("step", {}, after=["nobody"])], "no job of the call has"),
    ([JobSpec("step", {}, after=[At(5)])], "outside the call"),
    ([JobSpec("step", {}, key="k"), JobSpec("step", {}, key="k")], "a key names one job"),
    ([JobSpec("step", {}, after=[987654321])], "no job #987654321 exists"),
    ([JobSpec("step", {}, after="1")], "must be a list"),
    ([JobSpec("step", {}, after=[True])], "not bool"),
    ([JobSpec("step", {}, after=[0])], "is not a job id"),
    ([JobSpec("step", {}, after=[1] * 10_001)], "over the limit"),
    ([JobSpec("step", {}, after=[1], idempotency_key="x")], "cannot take an idempotency key"),
])
def test_a_bad_graph_is_refused_and_nothing_is_written(conn, specs, message):
    before = add(conn)  # the caller's own work in the same transaction
    with pytest.raises(EnqueueError, match=message):
        enqueue_many(conn, specs, registry=REG)
    # The caller's transaction is still usable and holds only its own job.
    conn.commit()
    assert conn.execute("SELECT array_agg(id) FROM background_jobs").fetchone()[0] == [before]
    assert conn.execute("SELECT count(*) FROM job_dependencies").fetchone()[0] == 0


# -- when a parent does not complete ----------------------------------------------------

@pytest.mark.parametrize("outcome", [O.FAILED, O.UNKNOWN, O.CANCELLED, O.SKIPPED])
def test_a_parent_that_does_not_complete_holds_its_dependent_and_run_anyway_goes(conn, outcome):
    parent = add(conn)
    held = add(conn, after=[parent])
    cleanup = add(conn, after=[Dep(parent, run_anyway=True)])
    conn.commit()
    run(conn, parent, outcome)
    assert status(conn, held) == "waiting"
    # unknown is not final yet (a reconciliation decides): the cleanup waits for it too
    assert status(conn, cleanup) == ("waiting" if outcome is O.UNKNOWN else "pending")


def test_a_retry_of_a_failed_parent_resumes_the_flow(conn):
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    run(conn, parent, O.FAILED)
    act(conn, ops.retry_job, parent)
    assert status(conn, child) == "waiting"
    run(conn, parent)
    assert status(conn, child) == "pending"


def test_an_unknown_parent_marked_completed_releases_its_dependent(conn):
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    run(conn, parent, O.UNKNOWN)
    act(conn, ops.mark_completed, parent)
    assert status(conn, child) == "pending"


def test_a_released_edge_is_never_counted_twice(conn):
    """A run_anyway edge released by a failure is not released again when the parent,
    retried, completes: the other parent still holds the child."""
    parent, other = add(conn), add(conn)
    child = add(conn, after=[Dep(parent, run_anyway=True), other])
    conn.commit()
    run(conn, parent, O.FAILED)
    act(conn, ops.retry_job, parent)
    run(conn, parent)
    assert status(conn, child) == "waiting"
    run(conn, other)
    assert status(conn, child) == "pending"


@pytest.mark.parametrize("action", [ops.cancel_job, ops.skip_job])
def test_the_operator_decides_what_becomes_of_the_dependents(conn, action):
    def flow():
        parent = add(conn)
        child = add(conn, after=[parent])
        grandchild = add(conn, after=[child])
        cleanup = add(conn, after=[Dep(child, run_anyway=True)])
        conn.commit()
        return parent, child, grandchild, cleanup

    parent, child, grandchild, cleanup = flow()
    act(conn, action, parent, dependents="hold")
    assert [status(conn, j) for j in (child, grandchild, cleanup)] == ["waiting"] * 3

    parent, child, grandchild, cleanup = flow()
    result = act(conn, action, parent, dependents="cancel")
    assert "2 waiting dependent(s) cancelled" in result.message
    # the cancelled child's run_anyway cleanup runs, as it would after any end of it
    assert [status(conn, j) for j in (child, grandchild, cleanup)] == [
        "cancelled", "cancelled", "pending"]
    audit = conn.execute("SELECT job_id, action, details FROM job_audit WHERE job_id = ANY(%s) "
                         "ORDER BY id", [[parent, child, grandchild]]).fetchall()
    assert audit[0][0] == parent and audit[0][2]["dependents"] == "cancel"
    assert {(a[0], a[1]) for a in audit[1:]} == {(child, "cancel"), (grandchild, "cancel")}
    assert all(a[2]["with_parents"] == [parent] for a in audit[1:])

    parent, child, grandchild, cleanup = flow()
    act(conn, action, parent, dependents="release")
    assert [status(conn, j) for j in (child, grandchild, cleanup)] == [
        "pending", "waiting", "waiting"]


def test_a_wrong_dependents_choice_is_refused(conn):
    parent = add(conn)
    conn.commit()
    with pytest.raises(ValueError, match="dependents must be one of"):
        ops.cancel_job(conn, parent, actor="ops", role="operator", reason="r",
                       dependents="drop")
    assert status(conn, parent) == "pending"


def test_a_waiting_job_can_itself_be_cancelled_or_skipped(conn):
    parent = add(conn)
    a, b = add(conn, after=[parent]), add(conn, after=[parent])
    conn.commit()
    act(conn, ops.cancel_job, a)
    act(conn, ops.skip_job, b)
    assert (status(conn, a), status(conn, b)) == ("cancelled", "skipped")
    run(conn, parent)  # their edges release nothing now
    assert (status(conn, a), status(conn, b)) == ("cancelled", "skipped")

def test_a_parent_its_handler_skipped_takes_no_action_and_its_dependents_are_acted_on(conn):
    """The runbook's path for a parent that ended skipped: no action applies to it, so
    the operator cancels or skips the waiting dependent itself, with its own choice for
    the jobs after it; a run_anyway cleanup of the parent has already run."""
    parent = add(conn)
    child = add(conn, after=[parent])
    grandchild = add(conn, after=[child])
    cleanup = add(conn, after=[Dep(parent, run_anyway=True)])
    conn.commit()
    run(conn, parent, O.SKIPPED)
    assert ops.allowed_actions("skipped") == ()
    refused = ops.skip_job(conn, parent, actor="ops", role="operator", reason="test",
                           dependents="release")
    conn.commit()
    assert not refused.ok and "Nothing was changed" in refused.message
    assert [status(conn, j) for j in (child, grandchild, cleanup)] == [
        "waiting", "waiting", "pending"]
    act(conn, ops.skip_job, child, dependents="cancel")
    assert [status(conn, j) for j in (child, grandchild)] == ["skipped", "cancelled"]


# -- races -----------------------------------------------------------------------------

def test_two_parents_completing_at_once_leave_no_dependent_waiting(clean_db):
    """Two transactions complete the two parents of one job; the second waits on the
    child's row lock while the first is open, so each statement began with the other
    parent unfinished. The decrement under the lock still counts both."""
    with psycopg.connect(clean_db) as setup:
        p1, p2 = add(setup), add(setup)
        child = add(setup, after=[p1, p2])
        e1, e2 = start(setup, p1), start(setup, p2)
        setup.commit()
    with psycopg.connect(clean_db) as t1, psycopg.connect(clean_db) as t2:
        assert finish(t1, p1, e1)  # holds the child's row, uncommitted
        done = threading.Event()

        def second() -> None:
            assert finish(t2, p2, e2)
            t2.commit()
            done.set()

        thread = threading.Thread(target=second)
        thread.start()
        wait_for(lambda: _waits_for_a_lock(clean_db))
        t1.commit()
        thread.join(30)
        assert done.is_set()
        assert status(t1, child) == "pending"


def test_a_dependent_enqueued_while_its_parent_finishes_is_released(clean_db):
    """The enqueue locks the running parent first; the finish waits for that lock and
    then proceeds with a snapshot from before the enqueue committed, which shows no edge.
    The release that follows in its own snapshot finds it."""
    with psycopg.connect(clean_db) as setup:
        parent = add(setup)
        execution = start(setup, parent)
        setup.commit()
    with psycopg.connect(clean_db) as te, psycopg.connect(clean_db) as tf:
        child = add(te, after=[parent])  # holds the parent's row lock, uncommitted
        thread = threading.Thread(target=lambda: (finish(tf, parent, execution), tf.commit()))
        thread.start()
        wait_for(lambda: _waits_for_a_lock(clean_db))
        te.commit()
        thread.join(30)
        assert status(te, parent) == "completed"
        assert status(te, child) == "pending"


def test_an_enqueue_waits_for_a_finish_in_progress_and_reads_its_status(clean_db):
    with psycopg.connect(clean_db) as setup:
        parent = add(setup)
        execution = start(setup, parent)
        setup.commit()
    with psycopg.connect(clean_db) as te, psycopg.connect(clean_db) as tf:
        finish(tf, parent, execution)  # the parent's row lock, uncommitted
        out: dict = {}
        thread = threading.Thread(target=lambda: (out.setdefault("id", add(te, after=[parent])),
                                                  te.commit()))
        thread.start()
        wait_for(lambda: _waits_for_a_lock(clean_db))
        tf.commit()
        thread.join(30)
        assert status(tf, out["id"]) == "pending"


def _waits_for_a_lock(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                         "AND datname = current_database()").fetchone()[0] > 0


# -- an operator's retry of a dependent ----------------------------------------------------

def waiting_on(conn, job_id: int) -> int:
    return conn.execute("SELECT waiting_on FROM background_jobs WHERE id = %s",
                        [job_id]).fetchone()[0]


def retry_audit(conn, job_id: int) -> tuple[str, str]:
    return conn.execute("SELECT from_status, to_status FROM job_audit WHERE job_id = %s "
                        "AND action = 'retry' ORDER BY id DESC LIMIT 1", [job_id]).fetchone()


def test_a_retried_dependent_with_a_parent_not_completed_waits_for_it_again(conn):
    """A child cancelled while one of its two parents had completed: the retry sends it
    back to waiting for the other, never to pending, and audits what it went to."""
    done, slow = add(conn), add(conn)
    child = add(conn, after=[done, slow])
    conn.commit()
    run(conn, done)
    act(conn, ops.cancel_job, child)
    result = act(conn, ops.retry_job, child)
    assert "waiting" in result.message and "1 parent" in result.message
    assert (status(conn, child), waiting_on(conn, child)) == ("waiting", 1)
    assert retry_audit(conn, child) == ("cancelled", "waiting")
    claimed = claim(conn, types=["step"], leases=[30.0], queues=None, limit=10, worker_id="w")
    conn.commit()
    assert [c.id for c in claimed] == [slow]  # the child is not claimable
    assert finish(conn, slow, claimed[0].execution_id)
    conn.commit()
    assert (status(conn, child), waiting_on(conn, child)) == ("pending", 0)


def test_a_retried_dependent_whose_parents_all_completed_is_pending(conn):
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    act(conn, ops.cancel_job, child)
    run(conn, parent)  # completes after the child was cancelled: its edge is released
    result = act(conn, ops.retry_job, child)
    assert "pending" in result.message
    assert (status(conn, child), waiting_on(conn, child)) == ("pending", 0)
    assert retry_audit(conn, child) == ("cancelled", "pending")


def test_a_retried_dependent_waits_on_a_run_anyway_edge_until_its_parent_ends(conn):
    parent = add(conn)
    cleanup = add(conn, after=[Dep(parent, run_anyway=True)])
    conn.commit()
    act(conn, ops.cancel_job, cleanup)
    act(conn, ops.retry_job, cleanup)
    assert (status(conn, cleanup), waiting_on(conn, cleanup)) == ("waiting", 1)
    run(conn, parent, O.FAILED)  # any final state releases a run_anyway edge
    assert (status(conn, cleanup), waiting_on(conn, cleanup)) == ("pending", 0)


@pytest.mark.parametrize("order", ["parent first", "child first", "together"])
def test_a_flow_cancelled_with_its_parent_and_retried_runs_in_order(conn, order):
    """The tester's path: a parent cancelled with its dependents, then both retried (one by
    one in either order, or as one bulk selection): the child waits for the parent."""
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    act(conn, ops.cancel_job, parent, dependents="cancel")
    assert status(conn, child) == "cancelled"
    if order == "together":
        result = ops.act_on_selection(conn, "retry", [parent, child], actor="ops",
                                      role="operator", reason="test", bulk_id=str(uuid.uuid4()))
        conn.commit()
        assert result.jobs == 2 and "1 wait" in result.message, result.message
    else:
        for job_id in ([parent, child] if order == "parent first" else [child, parent]):
            act(conn, ops.retry_job, job_id)
    assert [status(conn, j) for j in (parent, child)] == ["pending", "waiting"]
    claimed = claim(conn, types=["step"], leases=[30.0], queues=None, limit=10, worker_id="w")
    conn.commit()
    assert [c.id for c in claimed] == [parent]
    assert finish(conn, parent, claimed[0].execution_id, result='{"v": 42}')
    conn.commit()
    assert (status(conn, child), waiting_on(conn, child)) == ("pending", 0)


def test_a_retry_of_a_parent_that_failed_leaves_a_retried_child_waiting_until_it_completes(
        conn):
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    act(conn, ops.cancel_job, child)
    run(conn, parent, O.FAILED)
    act(conn, ops.retry_job, child)
    assert status(conn, child) == "waiting"  # held by the failed parent
    act(conn, ops.retry_job, parent)
    run(conn, parent, O.FAILED)
    assert (status(conn, child), waiting_on(conn, child)) == ("waiting", 1)
    act(conn, ops.retry_job, parent)
    run(conn, parent)
    assert (status(conn, child), waiting_on(conn, child)) == ("pending", 0)


def cancelled_child_of_a_running_parent(url: str) -> tuple[int, int, uuid.UUID]:
    """A parent started (its execution returned) and its child cancelled, committed."""
    with psycopg.connect(url) as setup:
        parent = add(setup)
        child = add(setup, after=[parent])
        setup.commit()
        act(setup, ops.cancel_job, child)
        execution = start(setup, parent)
        setup.commit()
    return parent, child, execution


def test_a_retry_waits_for_a_parents_finish_in_progress_and_counts_its_release(clean_db):
    """The finish holds the cancelled child's row (its release counts every dependent,
    whatever its status); the retry waits for it, then counts the edges in a snapshot
    that sees the release: pending, nothing left to wait for."""
    parent, child, execution = cancelled_child_of_a_running_parent(clean_db)
    with psycopg.connect(clean_db) as tf, psycopg.connect(clean_db) as tr:
        assert finish(tf, parent, execution)  # uncommitted
        thread = threading.Thread(target=lambda: act(tr, ops.retry_job, child))
        thread.start()
        wait_for(lambda: _waits_for_a_lock(clean_db))
        tf.commit()
        thread.join(30)
        assert (status(tf, child), waiting_on(tf, child)) == ("pending", 0)


def test_a_finish_that_began_before_a_retry_committed_still_releases_the_child(clean_db):
    """The retry holds the child, back in waiting, uncommitted; a parent's finish begins
    meanwhile (its snapshot shows the child cancelled), waits for the child's row and
    decrements the count the retry wrote: the child is not left waiting."""
    parent, child, execution = cancelled_child_of_a_running_parent(clean_db)
    with psycopg.connect(clean_db) as tr, psycopg.connect(clean_db) as tf:
        assert ops.retry_job(tr, child, actor="ops", role="operator", reason="test").ok
        thread = threading.Thread(target=lambda: (finish(tf, parent, execution), tf.commit()))
        thread.start()
        wait_for(lambda: _waits_for_a_lock(clean_db))
        tr.commit()
        thread.join(30)
        assert status(tr, parent) == "completed"
        assert (status(tr, child), waiting_on(tr, child)) == ("pending", 0)


# -- repair ----------------------------------------------------------------------------

def test_the_repair_duty_releases_what_an_older_runtime_left(conn):
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    # An older runtime's finish: the parent completed, the edge left as it was.
    conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now() "
                 "WHERE id = %s", [parent])
    conn.commit()
    assert status(conn, child) == "waiting"
    conn.commit()
    conn.autocommit = True  # as the duty's pool connections are
    assert flow_duty.repair(conn) == 1
    assert status(conn, child) == "pending"
    assert flow_duty.repair(conn) == 0  # a second pass finds nothing


def test_the_repair_duty_leaves_a_job_held_by_a_failed_parent(conn):
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    run(conn, parent, O.FAILED)
    conn.autocommit = True
    assert flow_duty.repair(conn) == 0
    assert status(conn, child) == "waiting"


# -- results ---------------------------------------------------------------------------

def test_a_completed_job_keeps_its_result_and_its_dependents_read_it(conn):
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    run(conn, parent, result='{"rows": 3}')
    assert conn.execute("SELECT result FROM background_jobs WHERE id = %s",
                        [parent]).fetchone()[0] == {"rows": 3}
    rows = conn.execute("SELECT parent_id FROM job_dependencies WHERE job_id = %s",
                        [child]).fetchall()
    assert rows == [(parent,)]


def test_retention_removes_edges_with_their_jobs(conn):
    parent = add(conn)
    child = add(conn, after=[parent])
    conn.commit()
    run(conn, parent, result='{"rows": 3}')
    conn.execute("DELETE FROM background_jobs WHERE id = %s", [child])
    conn.commit()
    assert conn.execute("SELECT count(*) FROM job_dependencies").fetchone()[0] == 0


# -- results through a real worker, thread and coroutine handlers ------------------------

def test_a_dependent_reads_what_its_parents_returned(clean_db, handler_kind, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_MAX_RESULT_BYTES", "1000")
    reg = Registry()
    seen: dict = {}
    job("make", registry=reg)(handler_kind(
        lambda ctx, payload: {"made": payload["n"], "token": "secret-value"}))
    job("big", registry=reg)(handler_kind(lambda ctx, payload: "x" * 2000))
    job("odd", registry=reg)(handler_kind(lambda ctx, payload: {1, 2}))
    if not inspect.iscoroutinefunction(handler_kind(lambda ctx, payload: None)):
        def use(ctx, payload):
            seen.update(ctx.parent_results())
    else:
        async def use(ctx, payload):
            seen.update(await ctx.parent_results())
    job("use", registry=reg)(use)
    with psycopg.connect(clean_db) as conn:
        ids = enqueue_many(conn, [JobSpec("make", {"n": 1}), JobSpec("make", {"n": 2}),
                                  JobSpec("use", {}, after=[At(0), At(1)]),
                                  JobSpec("big", {}), JobSpec("odd", {})], registry=reg)
        conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: all(job_row(clean_db, i)["status"] in ("completed", "failed")
                             for i in ids), message="the flow to end")
    assert seen == {ids[0]: {"made": 1, "token": "secret-value"},
                    ids[1]: {"made": 2, "token": "secret-value"}}
    big, odd = job_row(clean_db, ids[3]), job_row(clean_db, ids[4])
    assert (big["status"], big["last_error_code"]) == ("failed", "RESULT_TOO_LARGE")
    assert "over the 1000-byte limit" in big["last_error"]
    assert (odd["status"], odd["last_error_code"]) == ("failed", "RESULT_UNSTORABLE")
    assert big["result"] is None and odd["result"] is None


# -- the console's job page --------------------------------------------------------------

def test_the_job_page_shows_parents_dependents_what_holds_and_the_redacted_result(
        viewer, clean_db):
    with psycopg.connect(clean_db) as conn:
        done, held_by = add(conn), add(conn)
        child = add(conn, after=[done, Dep(held_by, run_anyway=True)])
        conn.commit()
        run(conn, done, result='{"api_key": "sk_live_abcdefgh12345", "rows": 3}')
    page = viewer.get(f"/jobs/{child}").get_data(as_text=True)
    parents = page[page.index('data-testid="job-parents"'):page.index("Dependents")]
    assert f'href="/jobs/{done}"' in parents and f'href="/jobs/{held_by}"' in parents
    assert parents.count("holds this job") == 1 and "runs anyway" in parents
    assert parents.index("holds this job") > parents.index(f'href="/jobs/{held_by}"')
    page = viewer.get(f"/jobs/{done}").get_data(as_text=True)
    dependents = page[page.index('data-testid="job-dependents"'):]
    assert f'href="/jobs/{child}"' in dependents and 'data-status="waiting"' in dependents
    result = page[page.index('data-testid="result"'):]
    assert "sk_live_abcdefgh12345" not in page
    assert "[REDACTED]" in result[:300] and "rows&#34;: 3" in result[:300]
