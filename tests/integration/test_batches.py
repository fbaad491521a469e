"""Batches: a set of jobs with callbacks, each enqueued once with the batch's counts.

Driven through the real statements: open_batch's, the finish statement every way out
of `running` writes through (write_batch), the operators' actions, the repair duty, and
a real worker for a member's fan-out. The races run on real connections in threads,
their order forced by row locks.
"""

from __future__ import annotations

import inspect
import threading
import uuid
from datetime import UTC, datetime

import psycopg
import pytest

from jobwarden import (
    Dep,
    EnqueueError,
    JobSpec,
    Registry,
    enqueue,
    find_batches,
    get_batch,
    job,
    open_batch,
    open_batch_async,
)
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties import batches as batch_duty
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.ops import operations as ops
from tests.helpers import job_row, run_async, running_worker, wait_for

REG = Registry()
job("member", queue="q", lease=30, max_attempts=1, registry=REG)(lambda ctx, payload: None)
job("done", queue="callbacks", max_attempts=7, registry=REG)(lambda ctx, payload: None)

CALLBACKS = {"on_complete": JobSpec("done", {"to": "complete"}),
             "on_success": JobSpec("done", {"to": "success"}),
             "on_failure": JobSpec("done", {"to": "failure"})}


def opened(conn, members: int = 3, *, owner: str | None = "import:42", **callbacks) -> tuple:
    """A batch of `members` pending members with every callback (or those given),
    committed: (batch id, member ids)."""
    with open_batch(conn, description="import 42", owner=owner, registry=REG,
                    **(callbacks or CALLBACKS)) as b:
        ids = b.enqueue_many([JobSpec("member", {"n": n}) for n in range(members)])
    conn.commit()
    return b.id, ids


def start(conn, job_id: int) -> uuid.UUID:
    """The job running, as a claim leaves it (only this one)."""
    row = conn.execute(
        "UPDATE background_jobs SET status = 'running', execution_id = gen_random_uuid(), "
        "attempts = attempts + 1, worker_id = 'w', started_at = now(), heartbeat_at = now(), "
        "lease_seconds = 30, lease_expires_at = now() + interval '30 seconds' "
        "WHERE id = %s AND status = 'pending' RETURNING execution_id, batch_id",
        [job_id]).fetchone()
    assert row, f"job {job_id} is not pending"
    return row[0]


TO = {O.COMPLETED: S.COMPLETED, O.FAILED: S.FAILED, O.UNKNOWN: S.UNKNOWN,
      O.SKIPPED: S.SKIPPED, O.CANCELLED: S.CANCELLED}


def finish(conn, job_id: int, execution_id: uuid.UUID, outcome: O = O.COMPLETED,
           batch_id: int | None = None) -> dict:
    return write_batch(conn, [Completion(
        job_id=job_id, execution_id=execution_id, type="member", attempt=1, lease=30,
        status=TO[outcome], outcome=outcome, queue="q", batch_id=batch_id)])


def run(conn, job_id: int, outcome: O = O.COMPLETED) -> None:
    assert finish(conn, job_id, start(conn, job_id), outcome)
    conn.commit()


def callbacks(conn, batch_id: int | None = None) -> dict[str, list[dict]]:
    """The callback jobs enqueued, by event: each one's payload."""
    rows = conn.execute("SELECT payload FROM background_jobs WHERE type = 'done' "
                        "ORDER BY id").fetchall()
    found: dict[str, list[dict]] = {}
    for (payload,) in rows:
        if batch_id is None or payload["batch"]["id"] == batch_id:
            found.setdefault(payload["batch"]["event"], []).append(payload)
    return found


def counts(payload: dict) -> tuple:
    b = payload["batch"]
    return (b["members"], b["completed"], b["failed"], b["cancelled"], b["skipped"],
            b["unknown"])


def act(conn, fn, job_id, **kw):
    result = fn(conn, job_id, actor="ops", role="operator", reason="test", **kw)
    conn.commit()
    assert result.ok, result.message
    return result


# -- the callbacks ----------------------------------------------------------------------

def test_every_member_completing_enqueues_complete_and_success_once_with_counts(conn):
    batch, ids = opened(conn)
    run(conn, ids[0])
    run(conn, ids[1])
    assert callbacks(conn) == {}
    run(conn, ids[2])
    found = callbacks(conn)
    assert sorted(found) == ["complete", "success"]
    assert [len(v) for v in found.values()] == [1, 1]
    complete = found["complete"][0]
    assert complete["to"] == "complete"  # the callback's own payload, and the batch's
    assert complete["batch"] == {"id": batch, "event": "complete", "owner": "import:42",
                                 "members": 3, "completed": 3, "failed": 0, "cancelled": 0,
                                 "skipped": 0, "unknown": 0}
    # A callback is a job like any: its type's queue and attempts.
    row = conn.execute("SELECT queue, max_attempts, status FROM background_jobs "
                       "WHERE type = 'done' LIMIT 1").fetchone()
    assert row == ("callbacks", 7, "pending")
    state = get_batch(conn, batch)
    assert (state.members, state.completed, state.unfinished) == (3, 3, 0)
    assert state.complete_at and state.success_at and state.failure_at is None
    assert set(state.callbacks) == {"complete", "success", "failure"}
    assert state.callbacks["failure"] is None and state.callbacks["complete"]
    # Counting again (the repair duty, a second finish statement) fires nothing.
    conn.commit()
    conn.autocommit = True
    assert batch_duty.repair(conn) == 0
    conn.execute("SELECT 1")
    assert [len(v) for v in callbacks(conn).values()] == [1, 1]


def test_the_first_failure_enqueues_on_failure_once_and_complete_counts_it(conn):
    batch, ids = opened(conn)
    run(conn, ids[0], O.FAILED)
    found = callbacks(conn)
    assert list(found) == ["failure"]  # at once, the others still pending
    assert counts(found["failure"][0]) == (3, 0, 1, 0, 0, 0)
    run(conn, ids[1], O.FAILED)
    run(conn, ids[2])
    found = callbacks(conn)
    assert sorted(found) == ["complete", "failure"]
    assert len(found["failure"]) == 1
    assert counts(found["complete"][0]) == (3, 1, 2, 0, 0, 0)


def test_a_member_retried_before_the_end_is_waited_for_and_can_still_succeed(conn):
    batch, ids = opened(conn, 2)
    run(conn, ids[0], O.FAILED)
    act(conn, ops.retry_job, ids[0])
    assert get_batch(conn, batch).failed == 0  # counted open again, in the retry's transaction
    run(conn, ids[1])
    assert list(callbacks(conn)) == ["failure"]  # complete waits for the retried member
    run(conn, ids[0])
    found = callbacks(conn)
    assert sorted(found) == ["complete", "failure", "success"]
    assert len(found["failure"]) == 1
    assert counts(found["success"][0]) == (2, 2, 0, 0, 0, 0)


def test_a_member_retried_after_complete_fired_may_bring_success_later(conn):
    batch, ids = opened(conn, 2)
    run(conn, ids[0], O.FAILED)
    run(conn, ids[1])
    assert sorted(callbacks(conn)) == ["complete", "failure"]
    act(conn, ops.retry_job, ids[0])
    run(conn, ids[0])
    found = callbacks(conn)
    assert {k: len(v) for k, v in found.items()} == {"failure": 1, "complete": 1, "success": 1}
    # Complete sealed the batch: no member joins it any more.
    with pytest.raises(EnqueueError, match=f"batch {batch} is complete"):
        enqueue(conn, "member", {}, batch=batch, registry=REG)


def test_cancelled_and_skipped_members_are_final_not_failures(conn):
    batch, ids = opened(conn, 4)
    act(conn, ops.cancel_job, ids[0])              # an operator, pending
    act(conn, ops.skip_job, ids[1])                # an operator, pending
    run(conn, ids[2], O.SKIPPED)                   # its handler
    run(conn, ids[3], O.CANCELLED)                 # its handler, stopped
    found = callbacks(conn)
    assert list(found) == ["complete"]
    assert counts(found["complete"][0]) == (4, 0, 0, 2, 2, 0)


def test_a_waiting_member_cancelled_with_its_parent_is_counted(conn):
    parent = enqueue(conn, "member", {}, registry=REG)
    with open_batch(conn, description="d", registry=REG, **CALLBACKS) as b:
        (member,) = b.enqueue_many([JobSpec("member", {}, after=[parent])])
    conn.commit()
    assert job_row(conn.info.dsn, member)["status"] == "waiting"
    act(conn, ops.cancel_job, parent, dependents="cancel")
    assert counts(callbacks(conn)["complete"][0]) == (1, 0, 0, 1, 0, 0)


def test_an_unknown_member_holds_complete_until_it_is_reconciled(conn):
    batch, ids = opened(conn, 2)
    run(conn, ids[0], O.UNKNOWN)
    run(conn, ids[1])
    assert callbacks(conn) == {}  # unknown is not final: it needs review
    assert get_batch(conn, batch).unknown == 1
    act(conn, ops.mark_failed, ids[0])
    found = callbacks(conn)
    assert sorted(found) == ["complete", "failure"]
    assert counts(found["complete"][0]) == (2, 1, 1, 0, 0, 0)

    batch, ids = opened(conn, 1)
    run(conn, ids[0], O.UNKNOWN)
    act(conn, ops.mark_completed, ids[0])
    assert sorted(callbacks(conn, batch)) == ["complete", "success"]


def test_a_group_retry_counts_its_members_back_open(conn):
    batch, ids = opened(conn, 2)
    run(conn, ids[0], O.FAILED)
    conn.execute("UPDATE background_jobs SET last_error_code = 'E' WHERE id = %s", [ids[0]])
    conn.commit()
    result = ops.retry_group(conn, "E", actor="ops", role="operator", reason="r",
                             seen_until=None)
    conn.commit()
    assert result.jobs == 1
    assert get_batch(conn, batch).failed == 0


# -- when a batch is sealed -------------------------------------------------------------

def test_an_empty_batch_completes_and_succeeds_when_its_opener_closes_it(conn):
    with open_batch(conn, description="nothing to do", registry=REG, **CALLBACKS) as b:
        assert callbacks(conn) == {}
    found = callbacks(conn)
    assert sorted(found) == ["complete", "success"]
    assert counts(found["success"][0]) == (0, 0, 0, 0, 0, 0)
    conn.rollback()  # in the opener's transaction: rolled back with it
    assert callbacks(conn) == {} and get_batch(conn, b.id) is None


def test_callbacks_wait_for_the_opener_that_commits_chunk_by_chunk(conn):
    with open_batch(conn, description="chunks", registry=REG, **CALLBACKS) as b:
        (first,) = b.enqueue_many([JobSpec("member", {})])
        conn.commit()
        run(conn, first)  # every member so far has completed, but more are coming
        assert callbacks(conn) == {}
        (second,) = b.enqueue_many([JobSpec("member", {})])
    conn.commit()
    assert callbacks(conn) == {}
    run(conn, second)
    assert counts(callbacks(conn)["success"][0]) == (2, 2, 0, 0, 0, 0)


def test_a_block_that_raises_leaves_the_batch_open_and_its_callbacks_undue(conn):
    with pytest.raises(RuntimeError), open_batch(conn, description="d", registry=REG,
                                                   **CALLBACKS):
        raise RuntimeError("the import broke")
    assert callbacks(conn) == {}
    assert get_batch(conn, conn.execute("SELECT max(id) FROM job_batches").fetchone()[0]
                     ).closed_at is None


def test_members_join_an_open_batch_from_any_transaction_until_it_completes(conn):
    batch, ids = opened(conn, 1)
    late = enqueue(conn, "member", {}, batch=batch, registry=REG)
    conn.commit()
    run(conn, ids[0])
    assert callbacks(conn) == {}  # the late member still runs
    run(conn, late)
    assert counts(callbacks(conn)["complete"][0]) == (2, 2, 0, 0, 0, 0)


@pytest.mark.parametrize("call, message", [
    (lambda c, b: enqueue(c, "member", {}, batch=987654, registry=REG),
     "batch 987654 does not exist"),
    (lambda c, b: enqueue(c, "member", {}, batch="1", registry=REG), "must be a batch's id"),
    (lambda c, b: enqueue(c, "member", {}, batch=b, idempotency_key="k", registry=REG),
     "cannot take an idempotency key"),
    (lambda c, b: enqueue(c, "member", {}, batch=b, unique_key="k", registry=REG),
     "cannot be folded into another job"),
    (lambda c, b: open_batch(c, description="d", on_complete=JobSpec(
        "done", {}, unique_key="k", expires_at=datetime(2030, 1, 1, tzinfo=UTC)),
        registry=REG).__enter__(), "takes no unique_key, expires_at"),
    (lambda c, b: open_batch(c, description="", registry=REG).__enter__(),
     "description must be a non-empty string"),
    (lambda c, b: open_batch(c, description="d", owner="x" * 501, registry=REG).__enter__(),
     "owner is 501 characters"),
    (lambda c, b: open_batch(c, description="d", on_complete=JobSpec("done", {"batch": 1}),
                             registry=REG).__enter__(), "may not use the key 'batch'"),
    (lambda c, b: open_batch(c, description="d", on_success=JobSpec("done", {}, after=[1]),
                             registry=REG).__enter__(), "takes no after"),
    (lambda c, b: open_batch(c, description="d", on_failure=JobSpec("done", {}, delay=5),
                             registry=REG).__enter__(), "takes no delay"),
    (lambda c, b: open_batch(c, description="d", on_failure={"type": "done"},
                             registry=REG).__enter__(), "must be a JobSpec"),
])
def test_bad_input_is_refused_and_nothing_is_written(conn, call, message):
    batch, _ = opened(conn, 1)
    before = conn.execute("SELECT count(*) FROM background_jobs").fetchone()[0]
    batches = conn.execute("SELECT count(*), sum(members) FROM job_batches").fetchone()
    with pytest.raises(EnqueueError, match=message):
        call(conn, batch)
    conn.commit()  # the caller's transaction is still usable
    assert conn.execute("SELECT count(*) FROM background_jobs").fetchone()[0] == before
    assert conn.execute("SELECT count(*), sum(members) FROM job_batches").fetchone() == batches


def test_batches_are_found_by_owner_newest_first(conn):
    first, _ = opened(conn, 1, owner="import:7")
    second, _ = opened(conn, 2, owner="import:7")
    opened(conn, 1, owner="import:8")
    assert [b.id for b in find_batches(conn, "import:7")] == [second, first]
    assert find_batches(conn, "import:9") == [] and get_batch(conn, 10**9) is None


def test_open_batch_async_in_the_callers_transaction(clean_db):
    async def go():
        async with await psycopg.AsyncConnection.connect(clean_db) as aconn:
            async with open_batch_async(aconn, description="async", registry=REG,
                                        **CALLBACKS) as b:
                ids = await b.enqueue_many([JobSpec("member", {}) for _ in range(2)])
                await b.enqueue("member", {})
            await aconn.commit()
            return b.id, ids
    batch, ids = run_async(go())
    with psycopg.connect(clean_db) as conn:
        assert get_batch(conn, batch).members == 3
        assert job_row(clean_db, ids[0])["batch_id"] == batch


# -- races -------------------------------------------------------------------------------

def test_two_members_finishing_at_once_enqueue_complete_once(clean_db):
    """Two transactions finish the last two members; the second waits on the batch's row
    lock while the first is open, so each began with the other member unfinished. The
    counts under the lock still see both, and only one statement writes complete. (In
    two queues: two finishes of one queue and type meet first at the rollup's row.)"""
    with psycopg.connect(clean_db) as setup:
        with open_batch(setup, description="race", registry=REG, **CALLBACKS) as batch:
            a, b = batch.enqueue_many([JobSpec("member", {}, queue="q1"),
                                       JobSpec("member", {}, queue="q2")])
        setup.commit()
        ea, eb = start(setup, a), start(setup, b)
        setup.commit()
    with psycopg.connect(clean_db) as t1, psycopg.connect(clean_db) as t2:
        assert finish(t1, a, ea)  # holds the batch's row, uncommitted
        done = threading.Event()

        def second() -> None:
            assert finish(t2, b, eb)
            t2.commit()
            done.set()

        thread = threading.Thread(target=second)
        thread.start()
        wait_for(lambda: _waits_for_a_lock(clean_db, "batch_count"))
        t1.commit()
        thread.join(30)
        assert done.is_set()
        found = callbacks(t1)
        assert {k: len(v) for k, v in found.items()} == {"complete": 1, "success": 1}
        assert counts(found["complete"][0]) == (2, 2, 0, 0, 0, 0)


def test_the_completers_autocommit_write_counts_in_the_outcomes_transaction(clean_db):
    """On an autocommit connection (the completer's), a member's outcome and its count
    commit together: while the count waits for the batch's row, the outcome is not
    visible either."""
    with psycopg.connect(clean_db) as setup:
        batch, (a,) = opened(setup, 1)
        ea = start(setup, a)
        setup.commit()
    with psycopg.connect(clean_db) as holder, \
            psycopg.connect(clean_db, autocommit=True) as completer:
        holder.execute("SELECT 1 FROM job_batches WHERE id = %s FOR UPDATE", [batch])
        thread = threading.Thread(target=lambda: finish(completer, a, ea, batch_id=batch))
        thread.start()
        wait_for(lambda: _waits_for_a_lock(clean_db, "batch_count"))
        meanwhile = job_row(clean_db, a)["status"]
        holder.rollback()
        thread.join(30)
    assert meanwhile == "running"
    assert job_row(clean_db, a)["status"] == "completed"
    with psycopg.connect(clean_db) as conn:
        assert sorted(callbacks(conn)) == ["complete", "success"]


def _waits_for_a_lock(url: str, statement: str = "") -> bool:
    """Whether a session waits for a lock (in the named statement, if given)."""
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                         "AND datname = current_database() AND query LIKE %s",
                         [f"-- jobwarden: {statement}%"]).fetchone()[0] > 0


# -- repair -------------------------------------------------------------------------------

def test_the_repair_duty_counts_what_an_older_runtime_left(conn):
    batch, (a, b) = opened(conn, 2)
    # An older runtime's finishes: the status written, the batch not told.
    conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now() "
                 "WHERE id = ANY(%s)", [[a, b]])
    conn.commit()
    assert callbacks(conn) == {}
    conn.commit()
    conn.autocommit = True  # as the duty's pool connections are
    assert batch_duty.repair(conn) == 2
    assert {k: len(v) for k, v in callbacks(conn).items()} == {"complete": 1, "success": 1}
    assert batch_duty.repair(conn) == 0  # a second pass finds nothing
    assert {k: len(v) for k, v in callbacks(conn).items()} == {"complete": 1, "success": 1}


def test_an_ordinary_job_is_in_no_batch_and_touches_none(conn):
    batch, _ = opened(conn, 1)
    plain = enqueue(conn, "member", {}, registry=REG)
    conn.commit()
    run(conn, plain)
    assert job_row(conn.info.dsn, plain)["batch_id"] is None
    assert get_batch(conn, batch).completed == 0


# -- a member's fan-out, through a real worker (thread and coroutine handlers) ------------

@pytest.mark.parametrize("where", ["own", "handler"])
def test_a_member_adds_members_and_the_callbacks_wait_for_them(clean_db, handler_kind,
                                                               where):
    """The only first member fans out and finishes last of its generation: the batch
    completes only once what it added has completed. In the handler's transaction, the
    adds commit with its outcome; in their own, at once."""
    reg = Registry()
    job("leaf", registry=reg)(handler_kind(lambda ctx, payload: None))
    job("done", registry=reg)(handler_kind(lambda ctx, payload: None))
    specs = [JobSpec("leaf", {"n": n}) for n in range(5)]
    if not inspect.iscoroutinefunction(handler_kind(lambda ctx, payload: None)):
        def fan(ctx, payload):
            assert ctx.batch is not None
            if where == "handler":
                with ctx.transaction():
                    ctx.add_to_batch(specs, registry=reg)
            else:
                ctx.add_to_batch(specs, registry=reg)
    else:
        async def fan(ctx, payload):
            if where == "handler":
                async with ctx.transaction():
                    await ctx.add_to_batch(specs, registry=reg)
            else:
                await ctx.add_to_batch(specs, registry=reg)
    job("fan", registry=reg)(fan)
    with psycopg.connect(clean_db) as conn:
        with open_batch(conn, description="fan", registry=reg,
                        on_complete=JobSpec("done", {})) as b:
            b.enqueue("fan", {})
        conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: _done_jobs(clean_db) == 1, message="the callback to run")
    with psycopg.connect(clean_db) as conn:
        state = get_batch(conn, b.id)
        assert (state.members, state.completed) == (6, 6)
        (payload,) = [r[0] for r in conn.execute(
            "SELECT payload FROM background_jobs WHERE type = 'done'")]
        assert counts(payload) == (6, 6, 0, 0, 0, 0)


def _done_jobs(url: str) -> int:
    with psycopg.connect(url) as c:
        return c.execute("SELECT count(*) FROM background_jobs WHERE type = 'done' "
                         "AND status = 'completed'").fetchone()[0]


def test_a_job_in_no_batch_cannot_add_to_one(clean_db):
    reg = Registry()
    seen: dict = {}

    @job("lonely", registry=reg)
    def lonely(ctx, payload):
        seen["batch"] = ctx.batch
        try:
            ctx.add_to_batch([JobSpec("lonely", {})])
        except EnqueueError as exc:
            seen["error"] = str(exc)

    with psycopg.connect(clean_db) as conn:
        lonely_id = enqueue(conn, "lonely", {}, registry=reg)
        conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, lonely_id)["status"] == "completed")
    assert seen == {"batch": None,
                    "error": f"job {lonely_id} is not a member of a batch: nothing to add to"}


def test_a_run_anyway_member_and_a_callback_that_fails_are_jobs_like_any(conn):
    """A callback failing is a job failing: retried by its own policy, counted nowhere."""
    parent = enqueue(conn, "member", {}, registry=REG)
    with open_batch(conn, description="d", registry=REG, **CALLBACKS) as b:
        (cleanup,) = b.enqueue_many([JobSpec("member", {}, after=[Dep(parent, run_anyway=True)])])
    conn.commit()
    run(conn, parent, O.FAILED)
    run(conn, cleanup)
    (done,) = callbacks(conn)["success"]
    callback_id = conn.execute("SELECT id FROM background_jobs WHERE type = 'done' AND "
                               "payload->'batch'->>'event' = 'success'").fetchone()[0]
    execution = start(conn, callback_id)
    assert write_batch(conn, [Completion(job_id=callback_id, execution_id=execution,
                                         type="done", attempt=1, lease=30, status=S.FAILED,
                                         outcome=O.FAILED, queue="callbacks")])
    conn.commit()
    assert get_batch(conn, b.id).failed == 0
    assert {k: len(v) for k, v in callbacks(conn).items()} == {"complete": 1, "success": 1}


def test_a_fan_out_in_the_handlers_transaction_holds_no_lock_on_the_batch(clean_db):
    """Members added inside ctx.transaction() are counted as it commits: while the
    handler goes on, another member of the batch finishes (its count takes the batch's
    row). An attempt that fails rolls back what it added, and its count with it."""
    reg = Registry()
    seen: dict = {}
    job("quick", registry=reg)(lambda ctx, payload: None)
    job("leaf", registry=reg)(lambda ctx, payload: None)
    job("done", registry=reg)(lambda ctx, payload: None)

    @job("fan", registry=reg, max_attempts=2, backoff=0)
    def fan(ctx, payload):
        with ctx.transaction():
            ctx.add_to_batch([JobSpec("leaf", {}) for _ in range(3)], registry=reg)
            if ctx.attempt == 1:
                raise RuntimeError("the first attempt fails after adding")
            seen["quick"] = _wait_status(clean_db, payload["quick"], "completed")

    with psycopg.connect(clean_db) as conn:
        with open_batch(conn, description="fan", registry=reg,
                        on_complete=JobSpec("done", {})) as b:
            quick = b.enqueue("quick", {}, delay=3600)  # runs when the fan-out says so
            b.enqueue("fan", {"quick": quick})
        conn.commit()
    with running_worker(reg, clean_db, concurrency=3):
        wait_for(lambda: job_row(clean_db, quick)["attempts"] == 0
                 and _fan_attempts(clean_db) == 2, message="the second attempt to start")
        with psycopg.connect(clean_db) as conn:
            conn.execute("UPDATE background_jobs SET available_at = now() WHERE id = %s",
                         [quick])
        wait_for(lambda: _done_jobs(clean_db) == 1, message="the callback to run")
    assert seen["quick"], "the member's count waited for the fan-out's transaction"
    with psycopg.connect(clean_db) as conn:
        state = get_batch(conn, b.id)
        assert (state.members, state.completed) == (5, 5)  # quick, fan, 3 leaves once


def _wait_status(url: str, job_id: int, status: str, seconds: float = 10.0) -> bool:
    try:
        wait_for(lambda: job_row(url, job_id)["status"] == status, timeout=seconds)
    except AssertionError:
        return False
    return True


def _fan_attempts(url: str) -> int:
    with psycopg.connect(url) as c:
        return c.execute("SELECT attempts FROM background_jobs WHERE type = 'fan'"
                         ).fetchone()[0]


# -- the console's job page -----------------------------------------------------------------

def test_the_job_page_links_a_members_batch(viewer, clean_db):
    with psycopg.connect(clean_db) as conn:
        with open_batch(conn, description="orders <csv>", registry=REG) as b:
            member = b.enqueue("member", {})
        plain = enqueue(conn, "member", {}, registry=REG)
        conn.commit()
    page = viewer.get(f"/jobs/{member}").get_data(as_text=True)
    named = page[page.index('data-testid="job-batch"'):]
    assert f'href="/batches/{b.id}"' in named[:300] and "orders &lt;csv&gt;" in named[:300]
    page = viewer.get(f"/jobs/{plain}").get_data(as_text=True)
    assert 'data-testid="job-batch-link"' not in page and 'href="/batches/' not in page
