"""Per-key limits: up to a job type's `concurrency_limit` jobs of one concurrency_key run
at once, across worker processes; each takes a distinct slot, and the database refuses a
second claim of one slot."""

from __future__ import annotations

import signal
import threading

import psycopg
import pytest

from jobwarden import JobSpec, enqueue, enqueue_many
from jobwarden.worker.engine.producer import claim
from tests.helpers import scalar, status_counts, wait_for
from tests.integration.test_claim_race import start_worker

LIMITS = {"pair:a": 2, "pair:b": 2, "single:a": 1, "single:b": 1}
TYPES = {2: "kl.pair", 1: "kl.single"}
#: More jobs per key than a claim takes at once, so the later keys' jobs are out of
#: reach of a claim that does not step past the earlier keys' jobs.
PER_KEY = 30
KEYLESS = 20
#: Each worker has a slot for every job the keys' limits let run at once (2+2+1+1), so a
#: job holding its slot at the app's barrier never keeps the job that would release it
#: waiting in the same worker's buffer.
WORKERS, CONCURRENCY = 3, 6

MAX_OVERLAP = """
    SELECT a.key, max((SELECT count(*) FROM limit_runs b
                       WHERE b.key = a.key AND b.started <= a.started
                         AND a.started < b.finished))
    FROM limit_runs a WHERE a.key IS NOT NULL GROUP BY a.key
"""
RUNNING_PER_KEY = """
    SELECT concurrency_key, count(*) FROM background_jobs
    WHERE status = 'running' AND concurrency_key IS NOT NULL GROUP BY concurrency_key
"""


def test_worker_processes_run_each_key_up_to_its_limit_and_start_every_key(conn, clean_db):
    conn.execute("CREATE TABLE limit_runs (job_id bigint, key text, started timestamptz, "
                 "finished timestamptz)")
    conn.execute("CREATE TABLE limit_reached (key text PRIMARY KEY)")
    conn.execute("CREATE TABLE limit_barrier_missed (job_id bigint)")
    keys = list(LIMITS)
    # Each key's whole backlog before the next key's: in plain claim order the last key
    # would wait for every other key's jobs.
    jobs = [JobSpec(TYPES[limit], {"key": key, "keys": keys}, concurrency_key=key)
            for key, limit in LIMITS.items() for _ in range(PER_KEY)]
    jobs += [JobSpec("kl.single", {}) for _ in range(KEYLESS)]
    enqueue_many(conn, jobs)
    conn.commit()
    total = len(jobs)
    most_running: dict[str, int] = {}

    def all_done() -> bool:
        # Sampled while the workers run: the claimed jobs of a key (running or waiting
        # in a worker's buffer) never outnumber its limit.
        with psycopg.connect(clean_db) as c:
            for key, n in c.execute(RUNNING_PER_KEY):
                most_running[key] = max(most_running.get(key, 0), n)
        return status_counts(clean_db).get("completed") == total

    procs = [start_worker("tests.apps.key_limits_app", "--concurrency", str(CONCURRENCY))
             for _ in range(WORKERS)]
    try:
        wait_for(all_done, timeout=180, interval=0.05, message=f"{total} jobs to complete")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            assert p.wait(timeout=30) == 0, p.stderr.read().decode()[-2000:]

    # Every job ran once, to its end.
    assert scalar(clean_db, "SELECT count(DISTINCT job_id) FROM limit_runs "
                            "WHERE finished IS NOT NULL") == total
    assert scalar(clean_db, "SELECT count(*) FROM job_executions") == total
    # The limit is respected and used: handlers of a key overlapped exactly up to it.
    with psycopg.connect(clean_db) as c:
        overlap = dict(c.execute(MAX_OVERLAP).fetchall())
        slots = dict(c.execute(
            "SELECT concurrency_key, array_agg(DISTINCT concurrency_slot ORDER BY "
            "concurrency_slot) FROM background_jobs WHERE concurrency_key IS NOT NULL "
            "GROUP BY concurrency_key").fetchall())
        reached = {r[0] for r in c.execute("SELECT key FROM limit_reached")}
    assert overlap == LIMITS
    assert all(most_running[key] <= limit for key, limit in LIMITS.items()), most_running
    assert slots == {key: list(range(limit)) for key, limit in LIMITS.items()}
    assert reached == set(LIMITS)
    # No key starved: every key started a job before any keyed job finished, although the
    # later keys' jobs all sat behind the earlier keys' backlogs.
    assert scalar(clean_db, """
        SELECT (SELECT max(first) FROM (SELECT min(started) AS first FROM limit_runs
                                        WHERE key IS NOT NULL GROUP BY key) AS f)
             < (SELECT min(finished) FROM limit_runs WHERE key IS NOT NULL)""")
    assert scalar(clean_db, "SELECT count(*) FROM limit_barrier_missed") == 0


def claim_now(conn, limits: dict[str, int], limit: int = 10) -> list[int]:
    """Claim as a worker handling these types (name: concurrency_limit) would; committed."""
    jobs = claim(conn, types=list(limits), leases=[30.0] * len(limits),
                 limits=list(limits.values()), queues=None, limit=limit, worker_id="test")
    conn.commit()
    return [j.id for j in jobs]


def slot_of(conn, job_id: int) -> int:
    return conn.execute("SELECT concurrency_slot FROM background_jobs WHERE id = %s",
                        [job_id]).fetchone()[0]


def finish(conn, *job_ids: int) -> None:
    conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now(), "
                 "lease_expires_at = NULL WHERE id = ANY(%s) AND status = 'running'",
                 [list(job_ids)])
    conn.commit()


def test_a_claim_takes_the_smallest_free_slots_up_to_the_types_limit(conn, clean_db):
    ids = [enqueue(conn, "wide", {}, concurrency_key="k") for _ in range(5)]
    keyless = enqueue(conn, "wide", {})
    conn.commit()
    assert claim_now(conn, {"wide": 3}) == [*ids[:3], keyless]
    assert [slot_of(conn, i) for i in ids[:3]] == [0, 1, 2]
    assert claim_now(conn, {"wide": 3}) == []  # the key is full
    finish(conn, ids[1])
    assert claim_now(conn, {"wide": 3}) == [ids[3]]
    assert slot_of(conn, ids[3]) == 1
    finish(conn, ids[0], ids[2])
    assert claim_now(conn, {"wide": 3}) == [ids[4]]
    assert slot_of(conn, ids[4]) == 0


def test_a_key_shared_by_two_types_applies_the_claimed_jobs_own_limit(conn, clean_db):
    wide_1 = enqueue(conn, "wide", {}, concurrency_key="k")
    narrow = enqueue(conn, "narrow", {}, concurrency_key="k")
    wide_2 = enqueue(conn, "wide", {}, concurrency_key="k")
    conn.commit()
    types = {"wide": 3, "narrow": 1}
    # A wide job starts beside two others of its key, a narrow one only when the key is
    # idle: in one claim the narrow job, behind the first wide one, stays pending.
    assert claim_now(conn, types) == [wide_1, wide_2]
    assert len({slot_of(conn, wide_1), slot_of(conn, wide_2)}) == 2
    finish(conn, wide_1)
    assert claim_now(conn, types) == []  # one wide job still runs
    finish(conn, wide_2)
    assert claim_now(conn, types) == [narrow]
    assert slot_of(conn, narrow) == 0


@pytest.mark.parametrize("first_commits", [True, False])
def test_two_claims_racing_for_a_keys_last_slot_cannot_both_take_it(conn, clean_db,
                                                                    first_commits):
    ids = [enqueue(conn, "wide", {}, concurrency_key="k") for _ in range(3)]
    conn.commit()
    assert claim_now(conn, {"wide": 2}, limit=1) == [ids[0]]  # slot 0; slot 1 is the last
    second: dict = {}
    with psycopg.connect(clean_db) as a, psycopg.connect(clean_db) as b:
        assert [j.id for j in claim(a, types=["wide"], leases=[30.0], limits=[2],
                                    queues=None, limit=1, worker_id="a")] == [ids[1]]

        def claim_b() -> None:  # skips the job `a` holds, takes the next one for slot 1
            try:
                second["jobs"] = [j.id for j in claim(
                    b, types=["wide"], leases=[30.0], limits=[2], queues=None, limit=1,
                    worker_id="b")]
                b.commit()
            except psycopg.errors.UniqueViolation as exc:
                second["error"] = exc
                b.rollback()

        racer = threading.Thread(target=claim_b)
        racer.start()
        wait_for(lambda: scalar(clean_db, "SELECT wait_event_type FROM pg_stat_activity "
                                          "WHERE pid = %s", [b.info.backend_pid]) == "Lock",
                 message="the second claim to wait for the first one's slot")
        if first_commits:
            a.commit()
        else:
            a.rollback()
        racer.join(timeout=10)
    assert not racer.is_alive()
    if first_commits:
        assert isinstance(second.get("error"), psycopg.errors.UniqueViolation), second
        assert claim_now(conn, {"wide": 2}) == []  # claiming again: the key is full
    else:
        assert second == {"jobs": [ids[2]]}
        assert slot_of(conn, ids[2]) == 1
