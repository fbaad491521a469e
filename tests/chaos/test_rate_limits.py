"""Rate limits across real worker processes: three workers together keep a type's rate
(counted from the executions' started_at, per one-second window), a worker killed while
holding the jobs its tokens paid for loses nothing and doubles nothing, and a live limit
set by an operator reaches a running worker and reverts when cleared."""

from __future__ import annotations

import psycopg
import pytest

from jobwarden import JobSpec, enqueue_many
from jobwarden.worker.engine.limits import lock_scopes
from jobwarden.worker.ops.operations import clear_limit, set_limit
from tests.apps.rate_limit_app import RATE, TABLES
from tests.helpers import scalar, status_counts, wait_for

pytestmark = pytest.mark.chaos

APP = "tests.apps.rate_limit_app"

#: The most executions of a type whose started_at fall in any one-second window that
#: starts at one of them (a sliding window: the strictest one-second count).
MOST_IN_A_SECOND = """
    SELECT coalesce(max((SELECT count(*) FROM job_executions b
                         WHERE b.type = a.type AND b.started_at >= a.started_at
                           AND b.started_at < a.started_at + interval '1 second')), 0)
    FROM job_executions a
    WHERE a.type = %(type)s AND a.started_at >= %(since)s AND a.started_at < %(until)s
"""


def most_in_a_second(url: str, type_: str, since=None, until=None) -> int:
    return scalar(url, MOST_IN_A_SECOND, {"type": type_, "since": since or "-infinity",
                                          "until": until or "infinity"})


@pytest.fixture
def rl_db(chaos_db):
    with psycopg.connect(chaos_db) as conn:
        conn.execute(TABLES)
    return chaos_db


def _enqueue(url: str, type_: str, n: int) -> None:
    with psycopg.connect(url) as conn:
        enqueue_many(conn, [JobSpec(type_, {"n": i}) for i in range(n)])


def _done_once(url: str, n_jobs: int) -> None:
    """Every job completed, its business row written exactly once."""
    assert status_counts(url).get("completed") == n_jobs
    assert scalar(url, "SELECT count(*) FROM rl_done") == n_jobs
    assert scalar(url, "SELECT count(DISTINCT job_id) FROM rl_done") == n_jobs


def test_three_workers_together_keep_the_rate(workers, rl_db):
    jobs = 6 * RATE  # about five seconds of work at the limit, after the first burst
    _enqueue(rl_db, "rl.tick", jobs)
    _enqueue(rl_db, "rl.free", 200)
    for _ in range(3):
        workers.start(APP, concurrency=4)
    wait_for(lambda: status_counts(rl_db).get("completed") == jobs + 200, timeout=60,
             interval=0.2, message="every job to complete")
    _done_once(rl_db, jobs + 200)
    # The three workers shared the work ...
    assert scalar(rl_db, "SELECT count(DISTINCT worker_id) FROM job_executions "
                         "WHERE type = 'rl.tick'") == 3
    # ... and no sliding second held more starts than the rate: with the default burst,
    # N/s is at most N in any one-second window, as a provider counts them.
    assert most_in_a_second(rl_db, "rl.tick") <= RATE
    # A waiting job never spent an attempt: one execution each, nothing retried.
    assert scalar(rl_db, "SELECT count(*) FROM job_executions WHERE type = 'rl.tick'") == jobs
    assert scalar(rl_db, "SELECT max(attempts) FROM background_jobs") == 1
    # The unlimited type was not held to the limited one's rate.
    assert most_in_a_second(rl_db, "rl.free") > RATE


def test_a_worker_killed_holding_paid_for_jobs_loses_and_doubles_nothing(workers, rl_db):
    jobs = 5 * RATE
    with psycopg.connect(rl_db) as conn:
        # Jobs that take a while, so the killed worker holds claimed ones.
        enqueue_many(conn, [JobSpec("rl.tick", {"sleep": 0.5}) for _ in range(jobs)])
    victim = workers.start(APP, concurrency=8)
    others = [workers.start(APP, concurrency=8) for _ in range(2)]
    wait_for(lambda: scalar(rl_db, "SELECT count(*) FROM background_jobs WHERE status = "
                                   "'running' AND worker_id LIKE %s", [f"%:{victim.pid}:%"]) >= 4,
             timeout=30, message="the victim to hold claimed jobs")
    victim.kill()
    held = scalar(rl_db, "SELECT count(*) FROM background_jobs WHERE status = 'running' "
                         "AND worker_id LIKE %s", [f"%:{victim.pid}:%"])
    assert held >= 4
    wait_for(lambda: status_counts(rl_db).get("completed") == jobs, timeout=90, interval=0.2,
             message="every job to complete after the kill")
    assert all(w.alive() for w in others)
    _done_once(rl_db, jobs)
    # The victim's jobs came back through their leases and ran again elsewhere.
    assert scalar(rl_db, "SELECT count(*) FROM job_executions WHERE outcome = "
                         "'worker_lost'") == held
    # Their re-runs paid for tokens again, and the limit held through the kill.
    assert most_in_a_second(rl_db, "rl.tick") <= RATE


#: The worker's refresh of the live limits (JOBWARDEN_DUTY_INTERVAL shortens REFRESH_SECONDS):
#: each wait for a change to reach it is this plus a claim.
REFRESH = 0.5


def test_a_live_limit_reaches_a_running_worker_and_reverts_when_cleared(workers, rl_db,
                                                                      monkeypatch):
    monkeypatch.setenv("JOBWARDEN_DUTY_INTERVAL", str(REFRESH))
    _enqueue(rl_db, "rl.tick", 40 * RATE)
    workers.start(APP, concurrency=4)
    wait_for(lambda: scalar(rl_db, "SELECT count(*) FROM job_executions") >= 2 * RATE,
             timeout=30, message="the worker to run at its declared rate")
    live = 4
    with psycopg.connect(rl_db) as conn:
        assert set_limit(conn, "type", "rl.tick", actor="ops@example.com", role="operator",
                         reason="provider degraded", rate=f"{live}/s").ok
    set_at = scalar(rl_db, "SELECT set_at FROM job_limit_controls")
    # Within the refresh interval (and a claim), the live limit holds: at most its rate in
    # any sliding second (the starts of the last second at the old rate count against it).
    settled = scalar(rl_db, "SELECT %s::timestamptz + make_interval(secs => %s)",
                     [set_at, REFRESH + 1])
    wait_for(lambda: scalar(rl_db, "SELECT now() > %s::timestamptz + interval '2 seconds'",
                            [settled]), timeout=30, message="two seconds under the live limit")
    assert most_in_a_second(rl_db, "rl.tick", since=settled) <= live
    assert scalar(rl_db, "SELECT count(*) FROM job_executions WHERE started_at > %s",
                  [settled]) > 0  # limited, not stopped
    with psycopg.connect(rl_db) as conn:
        assert clear_limit(conn, "type", "rl.tick", actor="ops@example.com",
                           role="operator", reason="provider recovered").ok
    cleared = scalar(rl_db, "SELECT now() + make_interval(secs => %s)", [REFRESH + 1])
    # The declared rate again: some second holds more than the live limit allowed.
    wait_for(lambda: most_in_a_second(rl_db, "rl.tick", since=cleared) > 2 * live,
             timeout=30, message="the declared rate back after clearing")
    assert most_in_a_second(rl_db, "rl.tick", since=cleared) <= RATE
    # Both actions are audited with their reasons.
    assert scalar(rl_db, "SELECT array_agg(action || ':' || reason ORDER BY id) FROM job_audit"
                  ) == ["set_limit:provider degraded", "clear_limit:provider recovered"]


def test_a_session_frozen_holding_the_limits_lock_stops_no_worker_for_long(workers, rl_db):
    _enqueue(rl_db, "rl.tick", 40 * RATE)
    _enqueue(rl_db, "rl.free", 100)
    for _ in range(2):
        workers.start(APP, concurrency=4)
    wait_for(lambda: scalar(rl_db, "SELECT count(*) FROM job_executions "
                                   "WHERE type = 'rl.tick'") >= RATE,
             timeout=30, message="the workers to run the limited type")
    # A worker frozen inside its limited claim's transaction, just after the lock
    # statement (the statement the producer sends, so bounded as it bounds it).
    frozen = psycopg.connect(rl_db, autocommit=True)
    frozen.execute("BEGIN")
    lock_scopes(frozen, ["type:rl.tick"])
    held_at = scalar(rl_db, "SELECT clock_timestamp()")
    # The other workers start the limited type again: the server ended the frozen session
    # after LOCK_IDLE_SECONDS idle, which let its lock go.
    wait_for(lambda: scalar(rl_db, "SELECT count(*) FROM job_executions WHERE type = "
                                   "'rl.tick' AND started_at > %s", [held_at]) >= RATE,
             timeout=30, message="limited starts to go on past the frozen session")
    assert frozen.closed or frozen.broken or _session_gone(frozen)
    # Meanwhile no job ran twice and the unlimited type was never held up.
    assert scalar(rl_db, "SELECT count(*) = count(DISTINCT job_id) FROM rl_done")
    wait_for(lambda: scalar(rl_db, "SELECT count(*) FROM background_jobs WHERE type = "
                                   "'rl.free' AND status = 'completed'") == 100,
             timeout=30, message="the unlimited type to complete")


def _session_gone(conn: psycopg.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.Error:
        return True
    return False
