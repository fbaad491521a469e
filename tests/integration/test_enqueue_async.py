"""enqueue_async / enqueue_many_async: the same enqueue, in an async caller's transaction
(psycopg AsyncConnection, SQLAlchemy AsyncConnection and AsyncSession)."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from jobwarden import EnqueueError, Registry, enqueue, enqueue_async, enqueue_many_async, job
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.store.db import sqlalchemy_url
from tests.helpers import job_row, run_async, scalar


def count(url: str) -> int:
    return scalar(url, "SELECT count(*) FROM background_jobs")


def test_a_rolled_back_async_transaction_leaves_no_job_and_a_commit_keeps_it(clean_db):
    async def scenario():
        async with await psycopg.AsyncConnection.connect(clean_db) as conn:
            await enqueue_async(conn, "send_email", {"n": 1})
            await conn.rollback()
            assert count(clean_db) == 0
            job_id = await enqueue_async(conn, "send_email", {"n": 2}, priority=5,
                                         queue="email")
            assert count(clean_db) == 0  # not visible before the caller commits
            await conn.commit()
            return job_id

    job_id = run_async(scenario())
    row = job_row(clean_db, job_id)
    assert (row["payload"], row["priority"], row["queue"]) == ({"n": 2}, 5, "email")
    assert count(clean_db) == 1


def test_enqueue_many_async_returns_ids_in_order_and_dedupes_by_idempotency_key(clean_db):
    async def scenario():
        async with await psycopg.AsyncConnection.connect(clean_db) as conn:
            first = await enqueue_many_async(conn, [
                {"type": "t", "payload": {"i": i}} for i in range(3)])
            a = await enqueue_async(conn, "t", {"i": "a"}, idempotency_key="k-1")
            again = await enqueue_many_async(conn, [
                {"type": "t", "payload": {"i": "b"}, "idempotency_key": "k-1"},
                {"type": "t", "payload": {"i": "c"}}])
            await conn.commit()
            return first, a, again

    first, a, (dup, fresh) = run_async(scenario())
    assert first == sorted(first) and len(set(first)) == 3
    assert [job_row(clean_db, i)["payload"]["i"] for i in first] == [0, 1, 2]
    assert dup == a and fresh not in (a, *first)
    assert count(clean_db) == 5


def test_a_bad_job_is_refused_before_any_statement_and_the_transaction_stays_usable(clean_db):
    async def scenario():
        async with await psycopg.AsyncConnection.connect(clean_db) as conn:
            with pytest.raises(EnqueueError):
                await enqueue_async(conn, "t", {"n": float("nan")})
            with pytest.raises(TypeError):
                await enqueue_async(conn, "t", {}, no_such_option=1)
            await enqueue_async(conn, "t", {"n": 1})  # the same transaction, still fine
            await conn.commit()

    run_async(scenario())
    assert count(clean_db) == 1


def test_the_sync_and_async_enqueue_store_the_same_row(clean_db, conn):
    """One set of statements for both (worker/jobs/enqueue.py, _enqueue_steps)."""
    reg = Registry()

    @job("typed", queue="reports", max_attempts=7, registry=reg)
    def typed(ctx, payload):
        pass

    sync_id = enqueue(conn, "typed", {"x": 1}, delay=60, registry=reg)
    conn.commit()

    async def scenario():
        async with await psycopg.AsyncConnection.connect(clean_db) as aconn:
            job_id = await enqueue_async(aconn, "typed", {"x": 1}, delay=60, registry=reg)
            await aconn.commit()
            return job_id

    async_id = run_async(scenario())
    fields = ("type", "queue", "max_attempts", "payload", "status", "version")
    assert ({f: job_row(clean_db, sync_id)[f] for f in fields}
            == {f: job_row(clean_db, async_id)[f] for f in fields}
            == {"type": "typed", "queue": "reports", "max_attempts": 7, "payload": {"x": 1},
                "status": "pending", "version": 1})


def test_a_type_this_process_does_not_know_takes_its_published_policy(clean_db, conn):
    elsewhere = Registry()  # another process's types, published as its worker does

    @job("remote", queue="far", max_attempts=9, registry=elsewhere)
    def remote(ctx, payload):
        pass

    publish_job_types(conn, elsewhere, published_by="another-worker")
    conn.commit()

    async def scenario():
        async with await psycopg.AsyncConnection.connect(clean_db) as aconn:
            job_id = await enqueue_async(aconn, "remote", {}, registry=Registry())
            await aconn.commit()
            return job_id

    row = job_row(clean_db, run_async(scenario()))
    assert (row["queue"], row["max_attempts"]) == ("far", 9)


def test_enqueue_through_sqlalchemy_async_connection_and_session(clean_db):
    url = sqlalchemy_url(clean_db)  # postgresql+psycopg: async with create_async_engine

    async def scenario():
        engine = create_async_engine(url)
        try:
            async with engine.begin() as sa_conn:
                a = await enqueue_async(sa_conn, "t", {"via": "connection"})
            async with AsyncSession(engine) as session:
                b = await enqueue_async(session, "t", {"via": "session"})
                await session.execute(text("SELECT 1"))
                await session.rollback()  # the session's transaction: no job
            async with AsyncSession(engine) as session:
                c = await enqueue_async(session, "t", {"via": "session"})
                await session.commit()
            return a, b, c
        finally:
            await engine.dispose()

    a, b, c = run_async(scenario())
    assert job_row(clean_db, a)["payload"] == {"via": "connection"}
    assert job_row(clean_db, c)["payload"] == {"via": "session"}
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE id = %s", [b]) == 0
