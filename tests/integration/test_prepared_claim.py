"""A producer's claim through its own prepared statement (worker/store/jobstore.py,
PreparedQuery): the statement prepared by name on the claim connection, every parameter
but the batch size dumped once, and what a run hands back and raises."""

from __future__ import annotations

import select
import threading
from uuid import UUID

import psycopg
import pytest

from jobwarden import JobSpec, enqueue_many
from jobwarden.worker.core.dberrors import DB_UNREACHABLE
from jobwarden.worker.engine.listener import Wakeup
from jobwarden.worker.engine.producer import ClaimedJob, ClaimSpec, JobBuffer, Producer, claim
from jobwarden.worker.store import db as store_db
from jobwarden.worker.store import jobstore
from jobwarden.worker.store.db import DedicatedConnection
from jobwarden.worker.store.jobstore import PreparedQuery
from jobwarden.worker.store.queries import Query

TYPES = ["prep.a", "prep.b"]


@pytest.fixture
def db(migrated_database):
    with psycopg.connect(migrated_database) as conn:
        enqueue_many(conn, [JobSpec(TYPES[i % 2], {"n": i, "to": "ops@example.com"},
                                    priority=i % 3) for i in range(12)]
                     + [JobSpec("prep.other", {"n": 99})])
        conn.commit()
    return migrated_database


def producer(url: str, *, listens: bool = False) -> Producer:
    return Producer(conn=DedicatedConnection(url), listens=listens,
                    claims=ClaimSpec(types=TYPES, leases=[30.0, 45.0], worker_id="prep-w",
                                     limits=[1, 1], type_queues=["default", "default"],
                                     type_max_attempts=[5, 5]),
                    buffer=JobBuffer(), concurrency=4, running=lambda: 0,
                    job_seconds=lambda: None, wake=Wakeup(), stop=threading.Event())


def named_statements(conn: psycopg.Connection) -> list[tuple[str, int]]:
    """(name, generic plans) of each claim statement this session prepared."""
    return conn.execute("SELECT name, generic_plans FROM pg_prepared_statements "
                        "WHERE statement LIKE '-- jobwarden: claim_jobs%' ORDER BY name"
                        ).fetchall()


def test_a_producer_claims_through_its_own_prepared_statement(db):
    p = producer(db)
    first = p._claim(3)
    second = p._claim(2)
    conn = p._conn.get()
    # Prepared by name once on this session, run twice on its generic plan; psycopg
    # prepared no statement of its own for the claim.
    assert named_statements(conn) == [("jobwarden_claim_jobs", 2)]
    assert [len(first), len(second)] == [3, 2]
    # The batch size varies per run; the rest was dumped once, and holds: only the
    # handled types, in claim order, each with its own lease.
    claimed = first + second
    assert {j.type for j in claimed} <= set(TYPES)
    with psycopg.connect(db) as other:
        rows = dict(other.execute(
            "SELECT id, lease_seconds FROM background_jobs WHERE status = 'running' "
            "AND worker_id = 'prep-w'").fetchall())
        order = [r[0] for r in other.execute(
            "SELECT id FROM background_jobs WHERE type = ANY(%s) "
            "ORDER BY jobwarden_claim_rank(available_at, priority), id LIMIT 5",
            [TYPES]).fetchall()]
    assert [j.id for j in claimed] == order
    assert rows == {j.id: (30.0 if j.type == "prep.a" else 45.0) for j in claimed}
    # Built as a cursor builds them: the same Python values, the lease's clock set.
    job = claimed[0]
    assert isinstance(job, ClaimedJob) and isinstance(job.execution_id, UUID)
    assert job.payload == {"n": job.payload["n"], "to": "ops@example.com"}
    assert job.attempt == 1 and job.granted_at is not None


def test_it_claims_what_a_cursor_claims(db):
    # The two doors to one statement: the same jobs, field for field but the tokens.
    p = producer(db)
    fast = p._claim(4)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE background_jobs SET status = 'pending', execution_id = NULL, "
                      "worker_id = NULL, lease_expires_at = NULL, attempts = 0 "
                      "WHERE id = ANY(%s)", [[j.id for j in fast]])
        slow = claim(conn, types=TYPES, leases=[30.0, 45.0], queues=None, limit=4,
                     worker_id="prep-w", limits=[1, 1], type_queues=["default", "default"],
                     type_max_attempts=[5, 5])

    def fields(job: ClaimedJob) -> tuple:
        return (job.id, job.queue, job.type, job.version, job.payload, job.priority,
                job.attempt, job.max_attempts, job.checkpoint, job.idempotency_key,
                job.snoozes, job.concurrency_key)

    assert [fields(j) for j in fast] == [fields(j) for j in slow]
    assert {j.execution_id for j in fast}.isdisjoint(j.execution_id for j in slow)


def test_a_claim_looks_its_columns_loaders_up_once_per_connection(db, monkeypatch):
    # The claim's columns never change: the Transformer that built its first rows on a
    # connection builds every later claim's there (PreparedQuery._rows), a claim of no
    # jobs (a plan made again) included, and a new connection gets a new one.
    p = producer(db)
    assert len(p._claim(1)) == 1  # connected and prepared
    built: list[object] = []
    real = jobstore.Transformer
    monkeypatch.setattr(jobstore, "Transformer", lambda conn: built.append(conn) or real(conn))
    p._plan_claim(p._conn.get())
    jobs = p._claim(2) + p._claim(3)
    assert built == []
    assert [j.attempt for j in jobs] == [1] * 5
    assert all(isinstance(j.execution_id, UUID) and j.payload["to"] == "ops@example.com"
               for j in jobs)
    p._conn.drop()
    (job,) = p._claim(1)
    assert built == [p._conn.get()]
    assert isinstance(job.execution_id, UUID) and job.payload["to"] == "ops@example.com"


def test_a_claim_reads_its_payloads_through_the_workers_jsonb_loader(db, monkeypatch):
    # Every payload of a claim, prepared or through a cursor, is read by JsonbLoader (a
    # DedicatedConnection's), and reads as psycopg's own loader reads it.
    read: list[str] = []
    real = jobstore.JsonbLoader.load
    monkeypatch.setattr(jobstore.JsonbLoader, "load",
                        lambda self, data: read.append(bytes(data).decode()) or real(self, data))
    p = producer(db)
    jobs = p._claim(3) + claim(p._conn.get(), types=TYPES, leases=[30.0, 45.0], queues=None,
                               limit=2, worker_id="prep-w")
    assert len(read) == len(jobs) == 5
    with psycopg.connect(db) as plain:
        for job in jobs:
            assert job.payload == plain.execute(
                "SELECT payload FROM background_jobs WHERE id = %s", [job.id]).fetchone()[0]


def test_a_new_claim_connection_prepares_it_again(db):
    p = producer(db)
    assert len(p._claim(1)) == 1
    with psycopg.connect(db, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE application_name = '' AND pid <> pg_backend_pid() "
                      "AND datname = current_database()")
    with pytest.raises(DB_UNREACHABLE):
        p._claim(1)
    p._conn.drop()  # as the claim loop does after such a failure
    assert len(p._claim(1)) == 1
    assert named_statements(p._conn.get()) == [("jobwarden_claim_jobs", 1)]


def test_a_notification_that_arrives_during_the_claim_is_not_slept_through(db):
    # During the prepared claim libpq keeps the notification (psycopg's handler is not
    # called there); the producer's next sleep reads it first and does not wait.
    p = producer(db, listens=True)
    assert len(p._claim(1)) == 1  # connected, prepared and listening
    with psycopg.connect(db) as locker, psycopg.connect(db, autocommit=True) as watch:
        # The claim's plan reads queue_controls: it waits for this lock.
        locker.execute("LOCK TABLE queue_controls IN ACCESS EXCLUSIVE MODE")
        got: list[list[ClaimedJob]] = []
        p._notified = False  # as the claim loop leaves it before each claim
        claiming = threading.Thread(target=lambda: got.append(p._claim(1)), daemon=True)
        claiming.start()
        while not watch.execute(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '-- jobwarden: claim_jobs%'").fetchall():
            assert claiming.is_alive()
        watch.execute("SELECT pg_notify('jobwarden_jobs', 'default')")
        locker.rollback()
        claiming.join(timeout=30)
    assert [len(jobs) for jobs in got] == [1]
    sleeping = threading.Thread(target=p._sleep, args=(60.0,), daemon=True)
    sleeping.start()
    sleeping.join(timeout=30)
    assert not sleeping.is_alive() and p._notified


def test_a_woken_producer_reads_its_notification_without_asking_for_the_encoding(
        db, monkeypatch):
    # The codec its notifications come in is the one listen_on saw: asking the
    # connection again cost every woken claim 0.02 ms before it was sent.
    p = producer(db, listens=True)
    assert len(p._claim(1)) == 1  # connected, prepared and listening
    conn = p._conn.get()
    with psycopg.connect(db, autocommit=True) as other:
        other.execute("SELECT pg_notify('jobwarden_jobs', 'default')")
    select.select([conn.fileno()], [], [], 30)
    monkeypatch.setattr(psycopg.Connection, "info", property(
        lambda self: pytest.fail("the encoding was asked of the connection again")))
    p._notified = False  # as the claim loop leaves it before it sleeps
    p._sleep(30.0)
    assert p._notified


def test_through_a_transaction_pooler_the_producer_prepares_nothing(db, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_POOLER", "transaction")
    p = Producer(conn=DedicatedConnection(db),
                 claims=ClaimSpec(types=TYPES, leases=[30.0, 45.0], worker_id="prep-w"),
                 buffer=JobBuffer(), concurrency=4, running=lambda: 0,
                 job_seconds=lambda: None, wake=Wakeup(), stop=threading.Event())
    assert len(p._claim(2)) == 2
    assert p._claim_jobs is None
    assert named_statements(p._conn.get()) == []


def test_a_prepared_query_raises_the_servers_error_by_its_sqlstate(db):
    with psycopg.connect(db, autocommit=True) as conn:
        q = PreparedQuery(Query("prep_probe", "SELECT %(n)s::int AS n, %(tag)s::text AS tag"),
                          {"n": None, "tag": "fixed"}, ("n",), conn)
        q.prepare(conn)
        assert q.prepared_on(conn)
        assert q.records(conn, tuple_of, n=7) == [(7, "fixed")]
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            q.records(conn, tuple_of, n="seven")
        # The session is usable after the error, and DISCARD PLANS keeps the statement.
        conn.execute("DISCARD PLANS")
        assert q.records(conn, tuple_of, n=8) == [(8, "fixed")]
    assert not q.prepared_on(conn)  # closed


def tuple_of(*values):
    return values


def plannings(conn: psycopg.Connection) -> list[str]:
    """Have the server tell this session's client each time it plans a statement (a
    trigger's too): the list those reports are appended to, as they come."""
    reports: list[str] = []
    conn.add_notice_handler(lambda d: reports.append(d.message_primary or ""))
    conn.execute("SET client_min_messages = log")
    conn.execute("SET log_planner_stats = on")
    return reports


def planned(reports: list[str]) -> int:
    return sum(r.startswith("PLANNER STATISTICS") for r in reports)


@pytest.mark.parametrize("warm", [True, False], ids=["made-again-at-once", "only-dropped"])
def test_a_claim_after_its_plans_were_made_again_plans_nothing(db, monkeypatch, warm):
    p = producer(db)
    assert len(p._claim(1)) == 1
    reports = plannings(p._conn.get())
    assert len(p._claim(1)) == 1 and planned(reports) == 0  # plans kept
    monkeypatch.setattr(store_db, "REPLAN_SECONDS", 0.0)
    assert len(p._claim(1)) == 1  # their age is up: due, and nothing sent for it yet
    assert p._conn.replan_due and planned(reports) == 0
    monkeypatch.setattr(store_db, "REPLAN_SECONDS", 3600.0)
    with psycopg.connect(db, autocommit=True) as other:
        counts = other.execute("SELECT count(*) FROM job_count_deltas").fetchone()[0]
        if warm:
            p._replan()  # as the claim loop does once a claim's jobs are handed on
            # The claim of no jobs planned the claim and its trigger's statements, and
            # claimed and counted nothing.
            assert planned(reports) >= 2
            assert other.execute("SELECT count(*) FROM job_count_deltas"
                                 ).fetchone()[0] == counts
        else:
            p._conn.replan()
        assert not p._conn.replan_due
        reports.clear()
        assert len(p._claim(1)) == 1
        assert other.execute("SELECT count(*) FROM background_jobs WHERE status = 'running'"
                             ).fetchone()[0] == 4
    # Made again at once, the next claim plans nothing; only dropped, it plans them all.
    assert (planned(reports) == 0) == warm, reports


def test_the_claim_loop_makes_its_plans_again_before_it_waits(db, monkeypatch):
    p = producer(db)
    assert len(p._claim(1)) == 1
    monkeypatch.setattr(store_db, "REPLAN_SECONDS", 0.0)
    reports = plannings(p._conn.get())
    seen: list[tuple[bool, int]] = []

    def sleep(timeout: float) -> None:  # the loop's wait for work: stop it there
        seen.append((p._conn.replan_due, planned(reports)))
        p.stop.set()

    monkeypatch.setattr(p, "_sleep", sleep)
    p._sleep_first = False
    assert p._lead(hand_over=False) is None
    # It claimed for its 4 slots, found its plans old, and made them again before it
    # waited for more.
    assert len(p.buffer) == 4
    [(due, plans)] = seen  # it waited once, its plans no longer due and made again
    assert not due and plans >= 2
