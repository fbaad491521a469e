"""Hostile handlers against real worker processes (tests/apps/handler_faults_app.py).

A handler that raises what is not an Exception (SystemExit, KeyboardInterrupt,
GeneratorExit, a BaseException of its own) or stops its lane's event loop fails its own
job with HANDLER_ABORTED; no slot thread, producer or loop dies of it, the jobs beside it
complete and the worker goes on claiming. A worker whose own thread dies exits non-zero.
Between two heartbeats (10 s apart here), a lane loop's short stall is logged once, and
a timeout is enforced: an execution past it is never a success.
"""

from __future__ import annotations

from itertools import pairwise

import psycopg
import pytest

from jobwarden import enqueue
from jobwarden.worker.core import errors as E
from tests.apps.handler_faults_app import QUEUE
from tests.chaos.support import events, settle
from tests.helpers import executions, wait_for

pytestmark = pytest.mark.chaos

APP = "tests.apps.handler_faults_app"
KINDS = ["SystemExit", "KeyboardInterrupt", "custom", "GeneratorExit"]


def add(url: str, type_: str, payload: dict | None = None) -> int:
    with psycopg.connect(url) as conn:
        job_id = enqueue(conn, type_, payload or {}, queue=QUEUE)
        conn.commit()
    return job_id


def started(url: str, job_id: int) -> bool:
    return any(e[2] in ("started", "start") for e in events(url, job_id))


def spans(url: str, job_ids: list[int]) -> list[tuple]:
    """(start, end) of each job's handler, by the database's clock, in start order."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT min(at) FILTER (WHERE event = 'start'), min(at) FILTER (WHERE event = "
            "'end') FROM chaos_events WHERE job_id = ANY(%s) GROUP BY job_id ORDER BY 1",
            [job_ids]).fetchall()


def running_together(url: str, type_: str, n: int) -> list[int]:
    """Enqueue n jobs that run until their gate opens; return once all n run at once."""
    ids = [add(url, type_) for _ in range(n)]
    wait_for(lambda: all(started(url, j) for j in ids),
             message=f"{n} jobs of {type_} to run at once")
    return ids


def open_gates(url: str, job_ids: list[int]) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO chaos_gates (job_id) SELECT unnest(%s::bigint[])", [job_ids])


@pytest.mark.parametrize("handler", ["thread", "coroutine"])
def test_a_handler_raising_a_base_exception_fails_its_job_and_nothing_else(
        workers, chaos_db, handler):
    """Each kind, raised while innocent jobs of the same lane run beside it (held open
    until the test lets them end): the job fails with HANDLER_ABORTED, the others
    complete, the worker keeps claiming."""
    w = workers.start(APP, concurrency=3, grace=1)
    kinds = KINDS + (["loop_stop"] if handler == "coroutine" else [])
    gated = "faults.gated" if handler == "coroutine" else "faults.tgated"
    raising = "faults.araise" if handler == "coroutine" else "faults.raise"
    for kind in kinds:
        beside = running_together(chaos_db, gated, 2)
        bad = add(chaos_db, raising, {"kind": kind})
        row = settle(chaos_db, bad)
        assert (row["status"], row["last_error_code"]) == ("failed", E.HANDLER_ABORTED), kind
        (execution,) = executions(chaos_db, bad)
        assert execution["outcome"] == "failed" and execution["traceback"], kind
        open_gates(chaos_db, beside)
        for j in beside:
            assert settle(chaos_db, j)["status"] == "completed", kind
        assert w.alive(), kind
    # The lane still has all its slots and its loop: three run at once.
    open_gates(chaos_db, running_together(chaos_db, gated, 3))
    assert w.alive()


@pytest.mark.parametrize("thread", ["slot", "heartbeat"])
def test_a_worker_whose_own_thread_dies_exits_non_zero(workers, chaos_db, thread):
    """SystemExit in the worker's own code on one of its threads (a patch in
    tests/apps/thread_death_app.py): the worker stops and says it failed."""
    w = workers.start("tests.apps.thread_death_app", concurrency=2, grace=1)
    before = add(chaos_db, "faults.tsteady", {"seconds": 0})
    assert settle(chaos_db, before)["status"] == "completed"
    add(chaos_db, "faults.kill_thread", {"thread": thread})
    wait_for(lambda: not w.alive(), timeout=30, message="the worker to stop")
    assert w.proc.returncode not in (0, None)
    assert w.logged("died (SystemExit): stopping the worker")


def test_a_short_stall_of_a_lane_loop_is_logged_once(workers, chaos_db):
    """A 2 s block, well within one heartbeat interval (10 s): said once as it begins,
    with the job on the loop, and once as it ends."""
    w = workers.start(APP, concurrency=2, grace=1)
    smooth = add(chaos_db, "faults.steady", {"seconds": 0.3})  # awaits: no stall
    assert settle(chaos_db, smooth)["status"] == "completed"
    blocker = add(chaos_db, "faults.block", {"seconds": 2.0})
    assert settle(chaos_db, blocker)["status"] == "completed"
    wait_for(lambda: w.logged("event loop running again"), timeout=5,
             message="the stall's end to be logged")
    log = w.log.read_text(errors="replace")
    stalls = [line for line in log.splitlines() if "event loop stalled" in line]
    # One line: none for the job that only awaited, one for the 2 s stall.
    assert len(stalls) == 1 and f"jobs on it: [{blocker}]" in stalls[0], stalls
    assert "handler_faults_app.py" in stalls[0]  # where the loop thread is held
    assert log.count("event loop running again") == 1


@pytest.mark.parametrize("type_", ["faults.swallow", "faults.overrun"])
def test_a_handler_past_its_timeout_is_ended_between_heartbeats_and_never_succeeds(
        workers, chaos_db, type_):
    """timeout=1 with a heartbeat every 10 s. The handler (a coroutine that swallows its
    cancel, or a thread deaf to it) waits a few seconds for the worker to record its end,
    then returns as if all went well: the end is recorded while it still runs, as a
    timeout, and its late success is discarded. The same handler returning at once, within
    its timeout, completes."""
    workers.start(APP, concurrency=2, grace=1)
    prompt = add(chaos_db, type_, {"prompt": True})
    assert settle(chaos_db, prompt)["status"] == "completed"
    job_id = add(chaos_db, type_)
    wait_for(lambda: {"saw_end", "no_end"} & {e[2] for e in events(chaos_db, job_id)},
             timeout=20, message="the handler to return")
    row = settle(chaos_db, job_id)
    assert (row["status"], row["last_error_code"]) == ("failed", E.TIMEOUT)
    (execution,) = executions(chaos_db, job_id)
    assert execution["outcome"] == "timeout"
    seen = [e[2] for e in events(chaos_db, job_id)]
    assert "saw_end" in seen, seen  # recorded before the handler returned
    if type_ == "faults.swallow":
        assert seen.index("swallowed") < seen.index("saw_end")  # its task was cancelled


def test_an_abandoned_coroutine_that_ends_later_hands_on_no_slot(workers, chaos_db):
    """One slot: a handler that swallows its cancel is abandoned (its slot goes to the
    next job) and returns later, while jobs still wait in the buffer. Its slot was
    given back when it was abandoned: it must not be handed on (two jobs at once on one
    slot) nor given back again (`Semaphore released too many times`)."""
    w = workers.start(APP, concurrency=1, grace=1)
    stubborn = add(chaos_db, "faults.swallow")
    wait_for(lambda: started(chaos_db, stubborn), message="the stubborn job to start")
    queued = [add(chaos_db, "faults.steady", {"seconds": 0.3}) for _ in range(10)]
    for j in queued:
        assert settle(chaos_db, j)["status"] == "completed"
    assert "saw_end" in [e[2] for e in events(chaos_db, stubborn)]
    one_at_a_time = spans(chaos_db, queued)
    for (_s, end), (start, _e) in pairwise(one_at_a_time):
        assert end <= start, one_at_a_time
    assert not w.logged("released too many times") and not w.logged("task running job")
    assert w.alive()


@pytest.mark.parametrize("handler", ["thread", "coroutine"])
def test_an_exception_whose_str_fails_fails_its_job_with_its_own_code(workers, chaos_db,
                                                                     handler):
    """Its __str__ raises KeyError, returns no str, or raises SystemExit: the job fails at
    once with the code its class gives (UNKNOWN, or a RetryableError's own), the message
    names the type, and the worker runs on. It used to stay running until its lease
    lapsed (WORKER_LOST), and the SystemExit stopped the worker."""
    w = workers.start(APP, concurrency=2, grace=1)
    type_ = "faults.aunprintable" if handler == "coroutine" else "faults.unprintable"
    for kind, code, error in [
            ("KeyError", E.UNKNOWN, "ProviderError: <exception str() failed>"),
            ("non-str", E.UNKNOWN, "NonStrError: <exception str() failed>"),
            ("SystemExit", E.UNKNOWN, "ExitStrError: <exception str() failed>"),
            ("retryable", "API_ERROR", "provider answered 500")]:
        job_id = add(chaos_db, type_, {"kind": kind})
        row = settle(chaos_db, job_id, timeout=20)
        assert (row["status"], row["last_error_code"]) == ("failed", code), kind
        assert row["last_error"].startswith(error), (kind, row["last_error"])
        (execution,) = executions(chaos_db, job_id)
        assert execution["outcome"] == "failed" and execution["traceback"], kind
        assert w.alive(), kind
    assert not w.logged("unexpected error in the runner")
    open_gates(chaos_db, running_together(chaos_db, "faults.tgated", 2))


def test_a_megabyte_error_fails_its_job_and_the_jobs_beside_it_keep_their_leases(
        workers, chaos_db):
    """A handler logs and raises a megabyte of minified JSON with bare URLs. Redacted
    whole, that held the GIL for minutes: no heartbeat, and the jobs beside it lost.
    Now its job fails with its own code, its error and traceback cut, while a job beside
    it runs on its lease and completes, its one attempt never lost."""
    workers.start(APP, concurrency=2, grace=1)
    beside = running_together(chaos_db, "faults.tgated", 1)
    job_id = add(chaos_db, "faults.huge_error", {"chars": 1_000_000})
    row = settle(chaos_db, job_id, timeout=20)
    assert (row["status"], row["last_error_code"]) == ("failed", "API_ERROR")
    assert len(row["last_error"]) <= 2000 and row["last_error"].startswith("provider answered")
    (execution,) = executions(chaos_db, job_id)
    assert len(execution["traceback"]) <= 8000
    open_gates(chaos_db, beside)
    (other,) = beside
    assert settle(chaos_db, other)["status"] == "completed"
    assert [e["outcome"] for e in executions(chaos_db, other)] == ["completed"]
