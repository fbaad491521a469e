"""Retention as a duty: old finished jobs go in small batches, one worker at a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psycopg
import pytest

from jobwarden import JobSpec, enqueue_many
from jobwarden.worker.duties.retention import DAY, DEFAULT_AGES, RetentionPolicy, prune, run_once
from jobwarden.worker.ops.operations import skip_job
from tests.helpers import scalar, start_process, status_counts, stop_processes, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def seed_finished(conn, status: str, days_ago: float, n: int) -> None:
    """`n` jobs finished `days_ago`, each with an execution, a done and a reserved effect
    ledger entry, and an audit row."""
    column = {"completed": "completed_at", "failed": "failed_at", "cancelled": "cancelled_at",
              "skipped": "skipped_at"}[status]
    conn.execute(f"""
        WITH jobs AS (
            INSERT INTO background_jobs (type, payload, status, attempts, {column}, created_at)
            SELECT 'old', jsonb_build_object('n', g), %(status)s, 1,
                   now() - make_interval(days => %(days)s::int),
                   now() - make_interval(days => %(days)s::int)
            FROM generate_series(1, %(n)s) g
            RETURNING id
        ), ex AS (
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                                        scheduled_at, outcome)
            SELECT id, gen_random_uuid(), 1, 'default', 'old', 'w', now(), 'completed' FROM jobs
        ), eff AS (
            INSERT INTO processed_effects (key, job_id, state)
            SELECT 'done:' || id, id, 'done' FROM jobs
            UNION ALL SELECT 'reserved:' || id, id, 'reserved' FROM jobs
        )
        INSERT INTO job_audit (job_id, actor, role, action, reason)
        SELECT id, 'ann', 'operator', 'retry', 'seeded' FROM jobs
    """, {"status": status, "days": days_ago, "n": n})


def counts(url: str) -> dict[str, int]:
    return {"jobs": scalar(url, "SELECT count(*) FROM background_jobs"),
            "executions": scalar(url, "SELECT count(*) FROM job_executions"),
            "done_effects": scalar(url, "SELECT count(*) FROM processed_effects "
                                        "WHERE state = 'done'"),
            "audit": scalar(url, "SELECT count(*) FROM job_audit"),
            "orphan_audit": scalar(url, "SELECT count(*) FROM job_audit WHERE job_id IS NULL")}


def test_each_status_goes_after_its_own_age_with_executions_and_done_effects(conn, clean_db):
    seed_finished(conn, "completed", 15, 30)  # past 14 days: goes
    seed_finished(conn, "completed", 13, 5)   # stays
    seed_finished(conn, "cancelled", 31, 4)   # goes
    seed_finished(conn, "skipped", 29, 3)     # stays
    seed_finished(conn, "failed", 60, 6)      # dead letters stay 90 days
    seed_finished(conn, "failed", 91, 2)      # goes
    conn.commit()
    deleted = run_once(conn, RetentionPolicy(batch=7))
    assert deleted == {"completed": 30, "skipped": 0, "cancelled": 4, "failed": 2}
    assert status_counts(clean_db) == {"completed": 5, "skipped": 3, "failed": 6}
    after = counts(clean_db)
    assert (after["jobs"], after["executions"], after["done_effects"]) == (14, 14, 14)
    assert (after["audit"], after["orphan_audit"]) == (50, 36)  # audit rows all stay
    # a reserved (never finished) ledger entry is evidence for reconciliation: kept
    assert scalar(clean_db, "SELECT count(*) FROM processed_effects WHERE state = 'reserved'") == 50


def seed_unfinished(conn, status: str, days_ago: int, n: int) -> None:
    """`n` jobs created `days_ago` and still `status` (pending: never claimed, or waiting
    out a long backoff; unknown: waiting for reconciliation, its execution's outcome and
    reserved ledger entry the evidence)."""
    conn.execute("""
        WITH jobs AS (
            INSERT INTO background_jobs (type, payload, status, attempts, created_at,
                                         available_at, last_error_code)
            SELECT 'old', jsonb_build_object('n', g), %(status)s,
                   CASE WHEN %(status)s = 'pending' THEN 0 ELSE 1 END,
                   now() - make_interval(days => %(days)s::int),
                   now() - make_interval(days => %(days)s::int),
                   CASE WHEN %(status)s = 'unknown' THEN 'PROVIDER_TIMEOUT' END
            FROM generate_series(1, %(n)s) g
            RETURNING id, status
        ), ex AS (
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                                        scheduled_at, outcome)
            SELECT id, gen_random_uuid(), 1, 'default', 'old', 'w', now(), 'unknown'
            FROM jobs WHERE status = 'unknown'
        )
        INSERT INTO processed_effects (key, job_id, state)
        SELECT 'reserved:' || id, id, 'reserved' FROM jobs WHERE status = 'unknown'
    """, {"status": status, "days": days_ago, "n": n})


def test_old_pending_and_unknown_jobs_outlive_every_retention_age(conn, clean_db):
    # Older than any age: retention deletes finished jobs only, whatever it is set to.
    seed_unfinished(conn, "pending", 400, 3)
    seed_unfinished(conn, "unknown", 400, 2)
    for status in DEFAULT_AGES:
        seed_finished(conn, status, 400, 1)  # these go, so the passes really ran
    conn.commit()
    shortest = RetentionPolicy(ages=dict.fromkeys(DEFAULT_AGES, 1.0))
    passes = [run_once(conn, RetentionPolicy()), run_once(conn, shortest),
              prune(conn, list(DEFAULT_AGES), 1.0)]
    assert status_counts(clean_db) == {"pending": 3, "unknown": 2}
    assert passes == [dict.fromkeys(DEFAULT_AGES, 1)] + [dict.fromkeys(DEFAULT_AGES, 0)] * 2
    # the unknown jobs' evidence for reconciliation stays with them
    assert scalar(clean_db, "SELECT count(*) FROM job_executions e JOIN background_jobs j "
                            "ON j.id = e.job_id WHERE j.status = 'unknown'") == 2
    assert scalar(clean_db, "SELECT count(*) FROM processed_effects e JOIN background_jobs j "
                            "ON j.id = e.job_id WHERE j.status = 'unknown'") == 2


def test_a_pass_deletes_in_batches_and_leaves_the_rest_for_the_next(conn, clean_db):
    seed_finished(conn, "completed", 20, 25)
    conn.commit()
    assert run_once(conn, RetentionPolicy(batch=5, max_batches=3))["completed"] == 15
    assert run_once(conn, RetentionPolicy(batch=5, max_batches=3))["completed"] == 10
    assert status_counts(clean_db) == {}


def test_only_one_worker_prunes_at_a_time(conn, clean_db):
    seed_finished(conn, "completed", 20, 10)
    conn.commit()
    with psycopg.connect(clean_db) as other:
        other.execute("SELECT pg_advisory_xact_lock(hashtext('jobwarden.retention'))")
        assert run_once(conn, RetentionPolicy()) is None  # another pass holds the lock
        assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 10
    assert run_once(conn, RetentionPolicy())["completed"] == 10  # released at its commit


@pytest.mark.parametrize("text, error", [("completed=soon", "positive age"),
                                         ("finished=14d", "unknown status"),
                                         ("pending=30d", "unknown status"),
                                         ("unknown=90d", "unknown status"),
                                         ("running=1d", "unknown status"),
                                         ("failed=0d", "positive age")])
def test_a_retention_setting_it_cannot_read_is_refused_by_name(text, error):
    with pytest.raises(ValueError, match=error):
        RetentionPolicy.parse(text)


def test_retention_settings_override_the_defaults_or_turn_it_off():
    policy = RetentionPolicy.parse("completed=7d, failed=180d")
    assert policy.ages == {"completed": 7 * DAY, "skipped": 30 * DAY, "cancelled": 30 * DAY,
                           "failed": 180 * DAY}
    assert RetentionPolicy.parse("off") is None


def test_workers_prune_while_they_drain_a_backlog(conn, clean_db, tmp_path):
    backlog = 1500
    seed_finished(conn, "completed", 20, 5000)
    seed_finished(conn, "failed", 20, 50)
    conn.execute("DROP TABLE IF EXISTS race_log")
    conn.execute("CREATE TABLE race_log (job_id bigint, execution_id uuid, pid int)")
    enqueue_many(conn, [JobSpec("race", {"n": i}) for i in range(backlog)])
    conn.commit()
    env = {**os.environ, "DATABASE_URL": clean_db, "JOBWARDEN_DUTY_INTERVAL": "0.5"}
    logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    procs = [start_process(
        [sys.executable, "-m", "jobwarden.worker.cli", "worker", "--app", "tests.apps.race_app",
         "--poll-interval", "0.2", "--concurrency", "4"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log.open("w")) for log in logs]
    try:
        wait_for(lambda: status_counts(clean_db).get("completed") == backlog
                 and scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                      "WHERE type = 'old' AND status = 'completed'") == 0,
                 timeout=120, interval=0.2, message="the backlog drained and the old jobs pruned")
    finally:
        stop_processes(procs, signal.SIGTERM)
    assert [p.returncode for p in procs] == [0] * len(procs)
    assert status_counts(clean_db) == {"completed": backlog, "failed": 50}
    assert scalar(clean_db, "SELECT count(DISTINCT job_id) FROM race_log") == backlog
    assert scalar(clean_db, "SELECT count(*) FROM job_executions") == backlog + 50
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 5050
    assert any("retention deleted" in log.read_text() for log in logs)


def test_a_worker_with_an_unreadable_retention_setting_refuses_to_start(clean_db):
    env = {**os.environ, "DATABASE_URL": clean_db, "JOBWARDEN_RETENTION": "completed=soon"}
    result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "worker", "--app",
                             "tests.apps.race_app"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == ("jobwarden: JOBWARDEN_RETENTION: 'completed=soon' needs a "
                             "positive age like 14d\n")


def _job_ids(conn, status: str) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT id FROM background_jobs WHERE status = %s ORDER BY id", [status])]


def skip_old_failures(conn, failed_days_ago: int, n: int) -> list[int]:
    """`n` jobs that failed `failed_days_ago`, skipped by an operator just now."""
    seed_finished(conn, "failed", failed_days_ago, n)
    conn.commit()
    ids = _job_ids(conn, "failed")
    for job_id in ids:
        assert skip_job(conn, job_id, actor="ann", role="operator",
                        reason="not relevant any more").ok
    conn.commit()
    return ids


def test_a_job_ages_from_the_moment_it_reached_its_current_final_state(conn, clean_db):
    # Failed 40 to 85 days ago, skipped now: skipped jobs stay 30 days from the skip.
    ids = skip_old_failures(conn, 40, 5) + skip_old_failures(conn, 85, 4)
    assert run_once(conn, RetentionPolicy()) == dict.fromkeys(DEFAULT_AGES, 0)
    assert sorted(_job_ids(conn, "skipped")) == sorted(ids)
    # 31 days after the skip they go, however long ago they had failed.
    conn.execute("UPDATE background_jobs SET skipped_at = skipped_at - interval '31 days'")
    conn.commit()
    assert run_once(conn, RetentionPolicy())["skipped"] == 9


def test_prune_and_the_retention_duty_judge_a_jobs_age_alike(conn, clean_db):
    skip_old_failures(conn, 60, 3)  # skipped now: too young for either path
    seed_finished(conn, "completed", 8, 4)  # old enough for `prune --older-than 7d`
    conn.commit()
    result = subprocess.run(
        [sys.executable, "-m", "jobwarden.worker.cli", "prune", "--older-than", "7d", "--yes"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": clean_db}, capture_output=True,
        text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pruned 4 job(s)" in result.stdout
    assert status_counts(clean_db) == {"skipped": 3}
    # Like the duty, prune takes the deleted jobs' done ledger entries with them.
    after = counts(clean_db)
    assert (after["jobs"], after["executions"], after["done_effects"]) == (3, 3, 3)
