"""Enqueue inside the caller's transaction: rollback, dedupe, validation, unknown types."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.rows import dict_row
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from jobwarden import EnqueueError, JobSpec, Registry, enqueue, enqueue_many, job
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.store.db import sqlalchemy_url
from tests.helpers import job_row, running_worker, scalar, status_counts, wait_for


def test_rolled_back_transaction_leaves_no_job(conn, clean_db):
    conn.execute("CREATE TABLE projects (id int)")
    conn.commit()
    conn.execute("INSERT INTO projects VALUES (1)")
    enqueue(conn, "send_email", {"projectId": 1})
    conn.rollback()
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0

    conn.execute("INSERT INTO projects VALUES (2)")
    job_id = enqueue(conn, "send_email", {"projectId": 2})
    # Not visible to anyone else before the business transaction commits ...
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0
    conn.commit()
    # ... and always there after.
    assert job_row(clean_db, job_id)["payload"] == {"projectId": 2}
    assert scalar(clean_db, "SELECT count(*) FROM projects") == 1


def test_enqueue_through_sqlalchemy_connection_and_session(clean_db):
    engine = create_engine(sqlalchemy_url(clean_db))
    with engine.begin() as sa_conn:
        a = enqueue(sa_conn, "t", {"via": "connection"})
    with Session(engine) as session:
        b = enqueue(session, "t", {"via": "session"})
        session.rollback()
    with Session(engine) as session, session.begin():
        c = enqueue(session, "t", {"via": "session"})
    engine.dispose()
    assert job_row(clean_db, a)["payload"] == {"via": "connection"}
    assert job_row(clean_db, c)["payload"] == {"via": "session"}
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE id = %s", [b]) == 0


def test_enqueue_on_a_connection_whose_rows_are_dicts(clean_db):
    """An application's connection may have any row factory: the store reads tuples."""
    with psycopg.connect(clean_db, row_factory=dict_row) as conn:
        ids = enqueue_many(conn, [JobSpec("t", {"n": 1}), JobSpec("t", {"n": 2},
                                                                 idempotency_key="k")])
        again = enqueue(conn, "t", {"n": 2}, idempotency_key="k")
        conn.commit()
    assert [job_row(clean_db, i)["payload"] for i in ids] == [{"n": 1}, {"n": 2}]
    assert again == ids[1]


def test_idempotency_key_returns_the_live_job(conn, clean_db):
    first = enqueue(conn, "welcome", {"userId": 52}, idempotency_key="welcome:user:52")
    again = enqueue(conn, "welcome", {"userId": 52}, idempotency_key="welcome:user:52")
    conn.commit()
    with psycopg.connect(clean_db) as other:
        third = enqueue(other, "welcome", {"userId": 52}, idempotency_key="welcome:user:52")
        other.commit()
    assert first == again == third
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 1


def test_idempotency_key_returns_the_job_while_a_worker_runs_it(conn, clean_db):
    holder = enqueue(conn, "welcome", {"userId": 52}, idempotency_key="welcome:user:52")
    conn.commit()
    (claimed,) = claim(conn, types=["welcome"], leases=[60.0], queues=None, limit=1,
                       worker_id="w1")
    conn.commit()
    assert claimed.id == holder
    with psycopg.connect(clean_db) as other:
        again = enqueue(other, "welcome", {"userId": 52}, idempotency_key="welcome:user:52")
        batch = enqueue_many(other, [
            JobSpec("welcome", {"userId": 52}, idempotency_key="welcome:user:52"),
            JobSpec("welcome", {"userId": 53}, idempotency_key="welcome:user:53")])
        other.commit()
    assert again == batch[0] == holder and batch[1] != holder
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs "
                            "WHERE idempotency_key = 'welcome:user:52'") == 1
    assert job_row(clean_db, holder)["status"] == "running"


def test_idempotency_key_is_free_again_once_the_job_finished(conn, clean_db):
    first = enqueue(conn, "welcome", {}, idempotency_key="k")
    conn.execute("UPDATE background_jobs SET status = 'completed' WHERE id = %s", [first])
    second = enqueue(conn, "welcome", {}, idempotency_key="k")
    conn.commit()
    assert second != first


def test_bulk_enqueue_returns_ids_in_order_and_dedupes(conn, clean_db):
    ids = enqueue_many(conn, [
        JobSpec("a", {"n": 1}), {"type": "b", "payload": {"n": 2}, "idempotency_key": "x"},
        JobSpec("c", {"n": 3}), {"type": "b", "payload": {"n": 4}, "idempotency_key": "x"},
    ])
    conn.commit()
    assert ids[1] == ids[3]
    assert [job_row(clean_db, i)["payload"]["n"] for i in ids] == [1, 2, 3, 2]
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 3


@pytest.mark.parametrize("payload, message", [
    ([1, 2], "JSON object"),
    ("text", "JSON object"),
    (None, "JSON object"),
    ({"when": object()}, "not JSON-serializable"),
    ({"x": float("nan")}, "not JSON-serializable"),
    ({"x": "a\x00b"}, "NUL"),
    ({"blob": "x" * 70_000}, "over the 65536-byte limit"),
])
def test_malformed_payload_is_rejected_at_enqueue(conn, clean_db, payload, message):
    with pytest.raises(EnqueueError, match=message):
        enqueue(conn, "t", payload)
    conn.commit()
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"type_": ""}, "invalid job type"),
    ({"type_": "<script>"}, "invalid job type"),
    ({"queue": "a b"}, "invalid queue"),
    ({"delay": -1}, "delay"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"priority": 2**40}, "priority"),
])
def test_bad_options_are_rejected_at_enqueue(conn, kwargs, message):
    type_ = kwargs.pop("type_", "t")
    with pytest.raises(EnqueueError, match=message):
        enqueue(conn, type_, {}, **kwargs)


def test_registered_policy_sets_queue_attempts_and_version(conn, clean_db):
    reg = Registry()

    @job("pdf", queue="reports", max_attempts=7, version=3, registry=reg)
    def pdf(ctx, payload):
        pass

    row = job_row(clean_db, (enqueue(conn, "pdf", {}, registry=reg), conn.commit())[0])
    assert (row["queue"], row["max_attempts"], row["version"]) == ("reports", 7, 3)


def test_a_worker_never_claims_a_type_it_has_no_handler_for(conn, clean_db):
    reg = Registry()

    @job("known", registry=reg)
    def known(ctx, payload):
        pass

    unknown_id = enqueue(conn, "added_in_next_release", {}, priority=100)
    known_id = enqueue(conn, "known", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: job_row(clean_db, known_id)["status"] == "completed")
    row = job_row(clean_db, unknown_id)
    assert (row["status"], row["attempts"], row["worker_id"]) == ("pending", 0, None)
    assert status_counts(clean_db) == {"pending": 1, "completed": 1}


def test_a_batch_keeps_every_field_as_given(conn, clean_db):
    # Names travel as array literals and unset fields as NULL arrays: a type or queue
    # named NULL stays a name, and a field set on one job of a batch reaches that job only.
    ids = enqueue_many(conn, [JobSpec("NULL", {"a": 1}, queue="NULL", priority=-3),
                              JobSpec("t", {"b": "\"q\" \\ {x}"}, delay=60, version=2,
                                      idempotency_key="k", concurrency_key="c"),
                              JobSpec("t", {}, max_attempts=7)])
    conn.commit()
    first, second, third = (job_row(clean_db, i) for i in ids)
    assert (first["type"], first["queue"], first["priority"]) == ("NULL", "NULL", -3)
    assert second["payload"] == {"b": "\"q\" \\ {x}"} and second["version"] == 2
    assert (second["idempotency_key"], second["concurrency_key"]) == ("k", "c")
    assert second["available_at"] > first["available_at"]
    assert third["max_attempts"] == 7 and third["idempotency_key"] is None
    assert first["max_attempts"] == 5 and first["version"] == 1
