"""The rollups (migration 0009) agree with the jobs, whatever statement changed them.

The count rollup counts a running job as pending, "not yet ended" (migration 0094): a
claim and a renewal move no count. Its readers take running from the jobs themselves."""

from __future__ import annotations

import pytest

from jobwarden import PermanentError, Registry, RetryableError, RetryPolicy, enqueue, job
from jobwarden.console.data.database import CQ
from tests.helpers import running_worker, scalar, wait_for

FAST = RetryPolicy(base=0.05, cap=0.05, jitter=0)


@pytest.fixture
def reg(default_registry):
    return default_registry


def rollup_counts(conn) -> dict:
    return {(s, q, t): n for s, q, t, n in conn.execute(
        "SELECT status, queue, type, sum(jobs) FROM job_count_deltas "
        "GROUP BY 1, 2, 3 HAVING sum(jobs) <> 0")}


def real_counts(conn) -> dict:
    """The jobs per (status, queue, type) as the rollup counts them: running as pending."""
    return {(s, q, t): n for s, q, t, n in conn.execute(
        "SELECT CASE WHEN status = 'running' THEN 'pending' ELSE status END, queue, type, "
        "count(*) FROM background_jobs GROUP BY 1, 2, 3")}


def raw_counts(conn) -> dict:
    return {(s, q, t): n for s, q, t, n in conn.execute(
        "SELECT status, queue, type, count(*) FROM background_jobs GROUP BY 1, 2, 3")}


def console_counts(conn) -> dict:
    """The console's counts per (status, queue, type): running apart from pending."""
    return {(r[0], r[1], r[2]): r[3]
            for r in conn.execute(CQ.console_counts_by_queue_type.sql)}


def delta_rows(conn) -> int:
    return conn.execute("SELECT count(*) FROM job_count_deltas").fetchone()[0]


def outcomes(conn) -> dict:
    return {(t, o): n for t, o, n in conn.execute(
        "SELECT type, outcome, sum(jobs) FROM job_minute_counts GROUP BY 1, 2")}


def test_batched_compare_and_set_statements_are_counted(conn, clean_db):
    """A 100-row completion statement, a DELETE and a queue move keep the counts exact."""
    conn.execute("INSERT INTO background_jobs (queue, type, payload, status, attempts, "
                 "execution_id, worker_id, started_at) "
                 "SELECT 'q' || (g % 3), 't' || (g % 2), '{}', 'running', 1, "
                 "gen_random_uuid(), 'w', now() FROM generate_series(1, 250) g")
    conn.execute("""UPDATE background_jobs SET status = 'completed', completed_at = now()
                    WHERE id IN (SELECT id FROM background_jobs WHERE status = 'running'
                                 ORDER BY id LIMIT 100) AND status = 'running'""")
    conn.execute("""UPDATE background_jobs SET status = 'pending', available_at = now()
                    WHERE id IN (SELECT id FROM background_jobs WHERE status = 'running'
                                 ORDER BY id LIMIT 30)""")
    conn.execute("UPDATE background_jobs SET status = 'failed', failed_at = now() "
                 "WHERE status = 'running' AND id % 2 = 0")
    conn.execute("UPDATE background_jobs SET queue = 'moved' WHERE status = 'pending' AND id % 3 = 0")
    conn.execute("UPDATE background_jobs SET heartbeat_at = now() WHERE status = 'running'")
    conn.execute("DELETE FROM background_jobs WHERE status = 'completed' AND id % 5 = 0")
    conn.commit()
    assert rollup_counts(conn) == real_counts(conn)
    got = outcomes(conn)
    assert sum(n for (_, o), n in got.items() if o == "completed") == 100
    assert sum(n for (_, o), n in got.items() if o == "retried") == 30
    failed = conn.execute("SELECT count(*) FROM background_jobs WHERE status = 'failed'")
    assert sum(n for (_, o), n in got.items() if o == "failed") == failed.fetchone()[0]


def test_fold_keeps_the_sums_and_shrinks_the_table(conn, clean_db):
    for _ in range(50):
        conn.execute("INSERT INTO background_jobs (queue, type, payload) VALUES ('q', 't', '{}')")
    conn.commit()
    before = rollup_counts(conn)
    assert conn.execute("SELECT count(*) FROM job_count_deltas").fetchone()[0] == 50
    conn.execute("SELECT jobwarden_rollup_fold()")
    conn.commit()
    assert rollup_counts(conn) == before == {("pending", "q", "t"): 50}
    assert conn.execute("SELECT count(*) FROM job_count_deltas").fetchone()[0] == 1


def test_rebuild_and_truncate(conn, clean_db):
    conn.execute("INSERT INTO background_jobs (queue, type, payload, status, completed_at) "
                 "SELECT 'q', 't', '{}', 'completed', now() FROM generate_series(1, 7)")
    conn.commit()
    conn.execute("DELETE FROM job_count_deltas")
    conn.commit()
    conn.execute("SELECT jobwarden_rollup_rebuild()")
    conn.commit()
    assert rollup_counts(conn) == {("completed", "q", "t"): 7}
    assert outcomes(conn) == {("t", "completed"): 7}
    conn.execute("TRUNCATE background_jobs CASCADE")
    conn.commit()
    assert rollup_counts(conn) == {} and outcomes(conn) == {}


def test_the_real_worker_keeps_the_rollups_exact(reg, conn, clean_db):
    """Enqueue, claim, retry, fail and complete through the runtime's own statements."""

    @job("good", registry=reg)
    def good(ctx, payload):
        return None

    @job("flaky", registry=reg, max_attempts=2, backoff=FAST)
    def flaky(ctx, payload):
        raise RetryableError("try again")

    @job("bad", registry=reg)
    def bad(ctx, payload):
        raise PermanentError("no")

    for _ in range(5):
        enqueue(conn, "good", {})
    enqueue(conn, "flaky", {})
    enqueue(conn, "bad", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                "WHERE status IN ('pending', 'running')") == 0,
                 message="every job to settle")
    assert rollup_counts(conn) == real_counts(conn)
    assert outcomes(conn) == {("good", "completed"): 5, ("flaky", "retried"): 1,
                              ("flaky", "failed"): 1, ("bad", "failed"): 1}


def _three_claimed_deploys(conn, reg) -> list:
    """Three jobs of a `deploy` type registered in `reg`, claimed by worker "w"."""
    from jobwarden.worker.engine.producer import claim

    @job("deploy", registry=reg, lease=30, backoff=FAST)
    def deploy(ctx, payload):
        return None

    for _ in range(3):
        enqueue(conn, "deploy", {})
    conn.commit()
    jobs = claim(conn, types=["deploy"], leases=[30.0], queues=None, limit=3, worker_id="w")
    conn.commit()
    return jobs


def test_a_hand_back_at_shutdown_is_no_retry_and_a_lost_worker_is_one(conn, clean_db):
    """Both move a job from running to pending; only the recorded outcome tells them apart."""
    from jobwarden.worker.duties.recovery import recover_stale_running
    from jobwarden.worker.engine.completer import hand_back

    reg = Registry()
    handed, lost, _ = _three_claimed_deploys(conn, reg)
    assert hand_back(conn, [(handed, None, None)]) == {handed.id}
    conn.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 s' "
                 "WHERE id = %s", [lost.id])
    conn.commit()
    assert recover_stale_running(conn, reg) == {"pending": 1}
    conn.commit()
    assert [r[0] for r in conn.execute(
        "SELECT outcome FROM job_executions WHERE job_id IN (%s, %s) ORDER BY job_id",
        [handed.id, lost.id])] == ["handed_back", "worker_lost"]
    assert outcomes(conn) == {("deploy", "retried"): 1}
    assert rollup_counts(conn) == real_counts(conn)


def test_a_claim_counted_by_the_short_path_moves_its_queue_and_nothing_else(conn, clean_db):
    """A claim leaves every row running, so migration 0068's trigger counts it with the
    deltas alone: the jobs move from pending to running, a defaulted job into its type's
    declared queue, and no outcome is counted. A statement that settles one row while it
    claims another goes the long way, and both are counted exactly too."""
    from jobwarden.worker.engine.producer import claim

    conn.execute("INSERT INTO background_jobs (queue, type, payload, policy_defaults) "
                 "SELECT 'default', 'mail', '{}', CASE WHEN g % 2 = 0 THEN '{queue}'::text[] END "
                 "FROM generate_series(1, 6) g")
    conn.commit()
    jobs = claim(conn, types=["mail"], leases=[30.0], queues=None, limit=4, worker_id="w",
                 type_queues=["mail"])
    conn.commit()
    assert len(jobs) == 4 and {j.queue for j in jobs} == {"default", "mail"}
    assert rollup_counts(conn) == real_counts(conn)
    assert outcomes(conn) == {}
    # A renewal of running rows moves nothing.
    conn.execute("UPDATE background_jobs SET heartbeat_at = now() WHERE status = 'running'")
    conn.commit()
    assert rollup_counts(conn) == real_counts(conn)
    # One statement: a running job completes, a pending one starts.
    done, started = jobs[0].id, conn.execute(
        "SELECT min(id) FROM background_jobs WHERE status = 'pending'").fetchone()[0]
    conn.execute("""UPDATE background_jobs SET
                        status = CASE WHEN id = %(done)s THEN 'completed' ELSE 'running' END,
                        completed_at = CASE WHEN id = %(done)s THEN now() END,
                        execution_id = CASE WHEN id = %(done)s THEN execution_id
                                            ELSE gen_random_uuid() END,
                        lease_expires_at = CASE WHEN id = %(started)s
                                                THEN now() + interval '30 s' END,
                        worker_id = 'w', started_at = now()
                    WHERE id IN (%(done)s, %(started)s)""", {"done": done, "started": started})
    conn.commit()
    assert rollup_counts(conn) == real_counts(conn)
    assert outcomes(conn) == {("mail", "completed"): 1}


def test_a_claim_and_a_renewal_write_no_count_row(conn, clean_db):
    """Migration 0094: pending and running are one count, so the trigger a claim fires
    returns without writing; the jobs still read as running where it is read apart."""
    from jobwarden.worker.engine.producer import claim

    for _ in range(3):
        enqueue(conn, "mail", {})
    conn.commit()
    before = delta_rows(conn)
    assert len(claim(conn, types=["mail"], leases=[30.0], queues=None, limit=2,
                     worker_id="w")) == 2
    conn.commit()
    assert delta_rows(conn) == before
    conn.execute("UPDATE background_jobs SET heartbeat_at = now() WHERE status = 'running'")
    conn.commit()
    assert delta_rows(conn) == before
    assert rollup_counts(conn) == real_counts(conn) == {("pending", "default", "mail"): 3}
    assert console_counts(conn) == raw_counts(conn) == {
        ("pending", "default", "mail"): 1, ("running", "default", "mail"): 2}


def test_the_counted_status_is_one_function_the_planner_inlines(conn, clean_db):
    """jobwarden_counted_status (migration 0095) says "running counts as pending" for every
    writer and reader of the rollup. It costs nothing: the planner replaces the call by
    its CASE (a function it could not inline, such as one with a SET clause or in
    PL/pgSQL, would show as a call per row)."""
    assert conn.execute(
        "SELECT jobwarden_counted_status(s) FROM unnest(ARRAY['running', 'pending', "
        "'failed', NULL]) WITH ORDINALITY AS u (s, n) ORDER BY n").fetchall() == [
        ("pending",), ("pending",), ("failed",), (None,)]
    plan = conn.execute("EXPLAIN (VERBOSE, FORMAT JSON) SELECT jobwarden_counted_status(status) "
                        "FROM background_jobs").fetchone()[0]
    assert plan[0]["Plan"]["Output"] == [
        "CASE WHEN (status = 'running'::text) THEN 'pending'::text ELSE status END"]


def test_a_claim_of_defaulted_jobs_moves_their_count_to_the_types_queue(conn, clean_db):
    """A claim gives a job that took the documented queue its type's declared one: the
    only count a claim moves, so the trigger must still write it."""
    from jobwarden.worker.engine.producer import claim

    conn.execute("INSERT INTO background_jobs (queue, type, payload, policy_defaults) "
                 "SELECT 'default', 'mail', '{}', '{queue}'::text[] "
                 "FROM generate_series(1, 3)")
    conn.execute("INSERT INTO background_jobs (queue, type, payload) "
                 "VALUES ('default', 'mail', '{}')")
    conn.commit()
    jobs = claim(conn, types=["mail"], leases=[30.0], queues=None, limit=4, worker_id="w",
                 type_queues=["outbox"])
    conn.commit()
    assert sorted(j.queue for j in jobs) == ["default", "outbox", "outbox", "outbox"]
    assert rollup_counts(conn) == real_counts(conn) == {
        ("pending", "default", "mail"): 1, ("pending", "outbox", "mail"): 3}
    assert console_counts(conn) == raw_counts(conn)


def test_a_retry_a_hand_back_and_a_recovery_move_no_count(reg, conn, clean_db):
    """Each sends a running job back to pending: one count, nothing written for it; the
    counts stay exact and the console's split follows the jobs."""
    from jobwarden.worker.duties.recovery import recover_stale_running
    from jobwarden.worker.engine.completer import hand_back

    handed, lost, retried = _three_claimed_deploys(conn, reg)
    before = delta_rows(conn)
    assert hand_back(conn, [(handed, None, None)]) == {handed.id}
    conn.commit()
    assert console_counts(conn) == raw_counts(conn)
    conn.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 s' "
                 "WHERE id = %s", [lost.id])
    conn.commit()
    assert recover_stale_running(conn, reg) == {"pending": 1}
    conn.commit()
    # A retry as the finish writes it: back to pending, its execution recorded.
    conn.execute("UPDATE background_jobs SET status = 'pending', available_at = now(), "
                 "lease_expires_at = NULL, last_error_code = 'E' WHERE id = %s", [retried.id])
    conn.commit()
    assert delta_rows(conn) == before
    assert rollup_counts(conn) == real_counts(conn) == {("pending", "default", "deploy"): 3}
    assert console_counts(conn) == raw_counts(conn) == {("pending", "default", "deploy"): 3}
    assert outcomes(conn) == {("deploy", "retried"): 2}


def test_the_consoles_counts_split_running_from_pending(conn, clean_db):
    """The rollup's pending holds the running jobs; the console's two count readers take
    them out again, per (queue, type) and in the navigation's totals."""
    conn.execute("INSERT INTO background_jobs (queue, type, payload, status, attempts, "
                 "execution_id, worker_id, started_at, lease_expires_at) "
                 "SELECT 'q' || (g % 2), 't' || (g % 3), '{}', "
                 "CASE WHEN g % 4 = 0 THEN 'pending' ELSE 'running' END, 1, "
                 "gen_random_uuid(), 'w', now(), "
                 "CASE WHEN g % 4 <> 0 THEN now() + interval '30 s' END "
                 "FROM generate_series(1, 40) g")
    conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now(), "
                 "lease_expires_at = NULL WHERE status = 'running' AND id % 5 = 0")
    conn.execute("UPDATE background_jobs SET status = 'failed', failed_at = now(), "
                 "lease_expires_at = NULL WHERE status = 'running' AND id % 7 = 0")
    conn.commit()
    assert rollup_counts(conn) == real_counts(conn)
    assert console_counts(conn) == raw_counts(conn)
    totals = {s: n for s, n in conn.execute(CQ.console_status_totals.sql) if n}
    assert totals == {s: n for s, n in conn.execute(
        "SELECT status, count(*) FROM background_jobs "
        "WHERE status NOT IN ('pending', 'running') GROUP BY 1")}
    # A `running` row left by a trigger from before migration 0094 reads as pending.
    conn.execute("INSERT INTO job_count_deltas (status, queue, type, jobs) "
                 "VALUES ('running', 'q1', 't1', 2), ('pending', 'q1', 't1', -2)")
    conn.commit()
    assert console_counts(conn) == raw_counts(conn)
