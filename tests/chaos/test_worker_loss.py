"""Workers killed with SIGKILL: mid-job, right after a claim, by a poison job, and in the
middle of checkpointed work. `running` is only a lease: another worker (or
`jobwarden recover`) takes the job back once the lease runs out."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import psycopg
import pytest

from tests.chaos.conftest import ROOT
from tests.chaos.support import (
    add,
    add_many,
    events,
    holding_claims,
    outcomes,
    running_on,
    settle,
)
from tests.helpers import executions, job_row, scalar, status_counts, wait_for

pytestmark = pytest.mark.chaos


def test_a_job_whose_worker_is_killed_mid_job_is_recovered_and_completed_elsewhere(
        workers, chaos_db, handler_app):
    a = workers.start(handler_app)
    job_id = add(chaos_db, "chaos.sleep", {"first_seconds": 60, "seconds": 0.1})
    row = running_on(chaos_db, job_id)
    assert row["status"] == "running" and row["attempts"] == 1
    a.kill()

    b = workers.start(handler_app)
    row = settle(chaos_db, job_id)
    assert (row["status"], row["attempts"]) == ("completed", 2)
    assert row["last_error_code"] == "WORKER_LOST"  # kept: the history of the job
    assert outcomes(chaos_db, job_id) == ["worker_lost", "completed"]
    lost, done = executions(chaos_db, job_id)
    assert lost["error_code"] == "WORKER_LOST" and lost["finished_at"] is not None
    assert str(a.pid) in lost["worker_id"] and str(b.pid) in done["worker_id"]
    # The killed run never wrote its order; the second one did, once.
    assert scalar(chaos_db, "SELECT count(*) FROM chaos_orders WHERE job_id = %s", [job_id]) == 1
    # The dead worker's own row is marked gone once its heartbeat is stale.
    wait_for(lambda: scalar(chaos_db, "SELECT state FROM job_workers WHERE pid = %s",
                            [a.pid]) == "gone", timeout=15, message="the killed worker gone")
    assert scalar(chaos_db, "SELECT state FROM job_workers WHERE pid = %s", [b.pid]) == "running"


def test_a_worker_killed_right_after_its_claim_committed_loses_nothing(workers, chaos_db):
    a = workers.start("tests.apps.chaos_claim_kill_app")
    job_id = add(chaos_db, "chaos.sleep", {"die_after_claim": True})
    wait_for(lambda: not a.alive(), message="the worker to die after its claim")
    row = job_row(chaos_db, job_id)
    assert (row["status"], row["attempts"]) == ("running", 1)  # the claim did commit
    assert events(chaos_db, job_id) == []  # and the handler never started

    workers.start("tests.apps.chaos_claim_kill_app")
    row = settle(chaos_db, job_id)
    assert (row["status"], row["attempts"]) == ("completed", 2)
    assert outcomes(chaos_db, job_id) == ["worker_lost", "completed"]
    assert [e[2] for e in events(chaos_db, job_id)] == ["started", "returned"]


def test_a_poison_job_that_kills_its_worker_fails_after_max_attempts_while_others_flow(
        workers, chaos_db):
    """Test 9 with a real crash: three workers, each death replaced like a supervisor
    (systemd, Kubernetes) would; the poison job ends failed (WORKER_LOST) after
    max_attempts=3 and every other job completes."""
    poison = add(chaos_db, "chaos.poison")
    others = add_many(chaos_db, "chaos.quick", [{"n": i} for i in range(60)])
    pool = [workers.start() for _ in range(3)]
    deaths = []

    def supervise_and_check():
        for i, w in enumerate(pool):
            if not w.alive():
                deaths.append(w.pid)
                pool[i] = workers.start()
        counts = status_counts(chaos_db)
        return (job_row(chaos_db, poison)["status"] == "failed"
                and counts.get("completed") == len(others))

    wait_for(supervise_and_check, timeout=60, interval=0.1,
             message="the poison job to fail and the others to complete")
    row = job_row(chaos_db, poison)
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("failed", 3, "WORKER_LOST")
    assert outcomes(chaos_db, poison) == ["worker_lost"] * 3
    assert len(events(chaos_db, poison)) == 3
    assert len(deaths) == 3  # one worker per attempt, and no other
    assert status_counts(chaos_db) == {"failed": 1, "completed": len(others)}
    assert scalar(chaos_db, "SELECT count(DISTINCT job_id) FROM chaos_orders") == len(others)
    assert scalar(chaos_db, "SELECT count(*) FROM chaos_orders") == len(others)


def test_a_lost_job_that_is_unsafe_to_repeat_goes_to_unknown_not_back_to_pending(
        workers, chaos_db):
    a = workers.start()
    job_id = add(chaos_db, "chaos.unsafe")
    running_on(chaos_db, job_id)
    a.kill()
    workers.start()
    row = settle(chaos_db, job_id)
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("unknown", 1, "WORKER_LOST")
    assert outcomes(chaos_db, job_id) == ["worker_lost"]
    assert len(events(chaos_db, job_id)) == 1  # never run again


def test_jobwarden_recover_returns_a_dead_workers_job_in_one_pass(workers, chaos_db):
    a = workers.start()
    job_id = add(chaos_db, "chaos.sleep", {"first_seconds": 60})
    running_on(chaos_db, job_id)
    a.kill()
    wait_for(lambda: scalar(chaos_db, "SELECT lease_expires_at < now() FROM background_jobs "
                                      "WHERE id = %s", [job_id]), message="the lease to expire")
    done = subprocess.run(
        [sys.executable, "-m", "jobwarden.worker.cli", "recover", "--app", "tests.apps.chaos_app",
         "--worker-stale-after", "1s"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": chaos_db}, capture_output=True,
        text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["recovered"] == {"pending": 1}
    assert len(report["workers_gone"]) == 1  # the killed worker, silent for over a second
    row = job_row(chaos_db, job_id)
    assert (row["status"], row["attempts"], row["last_error_code"]) == ("pending", 1, "WORKER_LOST")
    assert outcomes(chaos_db, job_id) == ["worker_lost"]


def test_a_worker_killed_holding_hundreds_of_claimed_jobs_loses_none_of_them(
        workers, chaos_db):
    """At the default batches (a claim of up to 1,000, a buffer of up to 2,000): a worker
    whose jobs take milliseconds claims hundreds ahead. Killed while it holds them, every
    one is recovered in one recovery (not a batch per recovery interval) and runs once
    more elsewhere; no business write happens twice."""
    a, warm, slow = holding_claims(workers, chaos_db)
    mine = f"%:{a.pid}:%"
    a.kill()
    with psycopg.connect(chaos_db) as conn:
        held = {r[0] for r in conn.execute(
            "SELECT id FROM background_jobs WHERE status = 'running' AND worker_id LIKE %s",
            [mine]).fetchall()}
    assert len(held) > 500  # more than one recovery transaction takes (RECOVERY_BATCH)
    # The slow jobs it never claimed (a slower machine claims fewer ahead) are made quick:
    # their first attempt would be run by b, for a minute each.
    with psycopg.connect(chaos_db) as conn:
        conn.execute("UPDATE background_jobs SET payload = '{}' WHERE status = 'pending'")

    # Eight slots, not fifty: each of these handlers holds two connections at once (its
    # notes and its business transaction), and fifty of them with another test's worker
    # beside them took the embedded server to its 100 connections.
    b = workers.start(concurrency=8)
    wait_for(lambda: scalar(chaos_db, "SELECT count(*) FROM background_jobs "
                                      "WHERE status = 'completed'") == len(warm) + len(slow),
             timeout=120, message="every job to complete")
    # Each business write once, each held job lost once and then completed.
    assert scalar(chaos_db, "SELECT count(DISTINCT job_id) = count(*) AND count(*) = %s "
                            "FROM chaos_orders", [len(slow)])
    with psycopg.connect(chaos_db) as conn:
        histories = dict(conn.execute(
            "SELECT job_id, array_agg(outcome ORDER BY attempt) FROM job_executions_all "
            "WHERE job_id = ANY(%s) GROUP BY job_id", [sorted(held)]).fetchall())
    assert histories == {job_id: ["worker_lost", "completed"] for job_id in held}
    # All of them in b's first recovery: one "recovered" line for the lot.
    recovered = [int(n) for n in re.findall(r"recovered (\d+) job\(s\) whose worker was lost",
                                            b.log.read_text(errors="replace"))]
    assert recovered == [len(held)], workers.logs()


def test_concurrent_recovery_passes_recover_each_lost_job_exactly_once(workers, chaos_db):
    lost = 40
    a = workers.start(concurrency=lost)
    ids = add_many(chaos_db, "chaos.sleep", [{"first_seconds": 120}] * lost)
    wait_for(lambda: scalar(chaos_db, "SELECT count(*) FROM chaos_events") == lost,
             message=f"{lost} handlers to start")
    a.kill()
    wait_for(lambda: scalar(chaos_db, "SELECT bool_and(lease_expires_at < now()) "
                                      "FROM background_jobs"), message="the leases to expire")
    passes = [subprocess.Popen(
        [sys.executable, "-m", "jobwarden.worker.cli", "recover", "--app", "tests.apps.chaos_app"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": chaos_db}, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True) for _ in range(4)]
    recovered = 0
    for p in passes:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        recovered += json.loads(out.strip().splitlines()[-1])["recovered"].get("pending", 0)
    assert recovered == lost
    assert status_counts(chaos_db) == {"pending": lost}
    assert scalar(chaos_db, "SELECT count(*) FROM job_executions WHERE outcome = 'worker_lost' "
                            "AND job_id = ANY(%s)", [ids]) == lost
    assert scalar(chaos_db, "SELECT max(attempts) FROM background_jobs") == 1


def test_after_kill_9_the_next_attempt_resumes_from_the_last_saved_checkpoint(workers, chaos_db):
    total = 200
    a = workers.start()
    job_id = add(chaos_db, "chaos.checkpointed", {"items": total, "first_delay": 0.03})
    # Let it get some way in, with a checkpoint written, then kill it without warning.
    wait_for(lambda: (job_row(chaos_db, job_id)["checkpoint"] or 0) >= 20, timeout=20,
             message="a persisted checkpoint")
    a.kill()
    saved = job_row(chaos_db, job_id)["checkpoint"]
    done_before_kill = scalar(chaos_db, "SELECT count(*) FROM chaos_items WHERE job_id = %s",
                              [job_id])
    assert 20 <= saved <= done_before_kill < total

    workers.start()
    row = settle(chaos_db, job_id)
    assert (row["status"], row["attempts"]) == ("completed", 2)
    assert row["checkpoint"] == total and row["progress"] == {"processed": total, "total": total}
    starts = [e[2] for e in events(chaos_db, job_id)]
    assert starts == ["start:0", f"start:{saved}"]  # resumed where the checkpoint said
    # Every item is done; only those after the last durable checkpoint were done twice.
    assert scalar(chaos_db, "SELECT count(DISTINCT item) FROM chaos_items WHERE job_id = %s",
                  [job_id]) == total
    redone = scalar(chaos_db, "SELECT count(*) - count(DISTINCT item) FROM chaos_items "
                              "WHERE job_id = %s", [job_id])
    assert redone == done_before_kill - saved
