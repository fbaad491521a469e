"""concurrency_key: at most one running job per key (the default limit), across worker
processes. Limits above one: test_concurrency_limits.py."""

from __future__ import annotations

import signal

import psycopg
import pytest

from jobwarden import JobSpec, Registry, enqueue, enqueue_many, job
from tests.helpers import running_worker, scalar, status_counts, wait_for
from tests.integration.test_claim_race import start_worker

KEYS = ["payment:1", "payment:2", "account:7", "account:9"]
OVERLAPS = """
    SELECT count(*) FROM key_runs a JOIN key_runs b
      ON a.key IS NOT DISTINCT FROM b.key AND a.job_id < b.job_id
     AND a.started < b.finished AND b.started < a.finished
    WHERE (a.key IS NULL) = %s
"""


def test_jobs_sharing_a_key_never_run_at_the_same_time(conn, clean_db):
    conn.execute("CREATE TABLE key_runs (job_id bigint, key text, started timestamptz, "
                 "finished timestamptz)")
    jobs = [JobSpec("serial", {"key": KEYS[i % 4]}, concurrency_key=KEYS[i % 4])
            for i in range(80)]
    jobs += [JobSpec("serial", {}) for _ in range(40)]
    enqueue_many(conn, jobs)
    conn.commit()
    procs = [start_worker("tests.apps.serial_app", "--concurrency", "4") for _ in range(3)]
    try:
        wait_for(lambda: status_counts(clean_db).get("completed") == 120, timeout=120,
                 interval=0.2, message="120 jobs to complete")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            assert p.wait(timeout=30) == 0, p.stderr.read().decode()[-2000:]
    assert scalar(clean_db, "SELECT count(*) FROM key_runs WHERE finished IS NOT NULL") == 120
    # Keyed jobs: not one overlapping pair. Keyless ones ran side by side (the check works).
    assert scalar(clean_db, OVERLAPS, [False]) == 0
    assert scalar(clean_db, OVERLAPS, [True]) > 0


def test_the_database_refuses_two_running_jobs_of_a_key_in_one_slot(conn, clean_db):
    for _ in range(3):
        enqueue(conn, "serial", {}, concurrency_key="k")
    start = ("UPDATE background_jobs SET status = 'running', execution_id = gen_random_uuid(), "
             "concurrency_slot = %s WHERE id = %s")
    conn.execute(start, [0, 1])
    conn.execute(start, [1, 2])  # another slot of the key: allowed (a limit of two)
    conn.commit()
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(start, [1, 3])
    conn.rollback()
    # A job that does not say which slot it takes gets slot 0, as a claim by a worker of
    # the release before per-key limits would: taken too.
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("UPDATE background_jobs SET status = 'running', "
                     "execution_id = gen_random_uuid() WHERE id = 3")
    conn.rollback()


def test_a_worker_runs_the_other_jobs_while_a_key_is_busy(conn, clean_db):
    reg = Registry()
    seen = []

    @job("hold", registry=reg)
    def hold(ctx, payload):
        seen.append(payload["n"])

    enqueue(conn, "hold", {"n": 1}, concurrency_key="busy", registry=reg)
    enqueue(conn, "hold", {"n": 2}, concurrency_key="busy", registry=reg)
    enqueue(conn, "hold", {"n": 3}, registry=reg)
    # Someone else is running a job of key "busy" right now.
    conn.execute("INSERT INTO background_jobs (type, payload, status, execution_id, "
                 "concurrency_key) VALUES ('other', '{}', 'running', gen_random_uuid(), 'busy')")
    conn.commit()
    with running_worker(reg, clean_db, concurrency=4):
        wait_for(lambda: seen == [3], message="the keyless job to run")
        assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE type = 'hold' "
                                "AND status = 'pending'") == 2
        conn.execute("UPDATE background_jobs SET status = 'completed' WHERE type = 'other'")
        conn.commit()
        wait_for(lambda: sorted(seen) == [1, 2, 3], message="the key's jobs, once free")
