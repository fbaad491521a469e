"""Bad input to enqueue is refused by JobSpec.validate() with an EnqueueError naming the
field, before any statement runs: the caller's business transaction stays usable."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from jobwarden import EnqueueError, JobSpec, enqueue
from jobwarden.worker.jobs.job_spec import MAX_PAYLOAD_DEPTH
from jobwarden.worker.store.db import sqlalchemy_url
from tests.helpers import scalar


def at(*parts: int, hours: int) -> datetime:
    """A datetime at a UTC offset of `hours` (Python allows ±23:59, PostgreSQL ±15:59)."""
    return datetime(*parts, tzinfo=timezone(timedelta(hours=hours)))


#: Each side of the range of instants a UTC datetime can name: in range (first) and a
#: microsecond out (second), each written at an offset of one hour.
FIRST_INSTANT, BEFORE_FIRST = at(1, 1, 1, 1, hours=1), at(1, 1, 1, 0, 59, 59, 999999, hours=1)
LAST_INSTANT, AFTER_LAST = (at(9999, 12, 31, 22, 59, 59, 999999, hours=-1),
                            at(9999, 12, 31, 23, hours=-1))


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"a": value}
    return value


#: (enqueue keyword arguments, the field the error must name)
BAD = [
    ({"payload": {"x": "lone \ud800"}}, "payload.x"),
    ({"payload": {"bad \udfff key": 1}}, "payload"),
    ({"payload": {"k\x00": 1}}, "payload"),
    ({"payload": {"x": ["ok", "a\x00b"]}}, "payload.x[1]"),
    ({"payload": {1: "int key"}}, "payload"),
    ({"payload": {"x": {(1, 2): "tuple key"}}}, "payload.x"),
    ({"payload": nested(1000)}, "payload"),
    ({"payload": nested(MAX_PAYLOAD_DEPTH + 1)}, "payload"),
    ({"payload": {"x": float("inf")}}, "payload.x"),
    ({"priority": True}, "priority"),
    ({"priority": 1.5}, "priority"),
    ({"max_attempts": True}, "max_attempts"),
    ({"version": False}, "version"),
    ({"version": True}, "version"),
    ({"delay": 1e12}, "delay"),
    ({"delay": True}, "delay"),
    ({"delay": float("nan")}, "delay"),
    ({"concurrency_key": "k" * 1_000_000}, "concurrency_key"),
    ({"concurrency_key": ""}, "concurrency_key"),
    ({"concurrency_key": 42}, "concurrency_key"),
    ({"concurrency_key": "a\x00b"}, "concurrency_key"),
    ({"idempotency_key": "k" * 1_000_000}, "idempotency_key"),
    ({"idempotency_key": "lone \ud800"}, "idempotency_key"),
    ({"idempotency_key": b"bytes"}, "idempotency_key"),
    ({"run_at": BEFORE_FIRST}, "run_at"),
    ({"run_at": AFTER_LAST}, "run_at"),
    ({"expires_at": BEFORE_FIRST}, "expires_at"),
    ({"expires_at": AFTER_LAST}, "expires_at"),
    ({"queue": "q\n"}, "queue"),
    ({"type": "t\n"}, "type"),
]


def call(conn, kwargs):
    kwargs = dict(kwargs)
    return enqueue(conn, kwargs.pop("type", "t"), kwargs.pop("payload", {}), **kwargs)


@pytest.fixture
def business(clean_db):
    """A business table the caller writes in the same transaction as its enqueue."""
    with psycopg.connect(clean_db, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS business_rows (note text)")
        c.execute("TRUNCATE business_rows")
    return clean_db


@pytest.mark.parametrize("kwargs, field", BAD, ids=[f for _, f in BAD])
def test_bad_input_names_the_field_and_the_psycopg_transaction_stays_usable(
        business, kwargs, field):
    with psycopg.connect(business) as conn:
        conn.execute("INSERT INTO business_rows VALUES ('before')")
        with pytest.raises(EnqueueError) as raised:
            call(conn, kwargs)
        assert raised.value.field == field
        assert str(raised.value).startswith(field)
        conn.execute("INSERT INTO business_rows VALUES ('after')")
        conn.commit()
    assert scalar(business, "SELECT count(*) FROM business_rows") == 2
    assert scalar(business, "SELECT count(*) FROM background_jobs") == 0


@pytest.mark.parametrize("kwargs, field", BAD, ids=[f for _, f in BAD])
def test_bad_input_leaves_a_sqlalchemy_session_usable(business, kwargs, field):
    engine = create_engine(sqlalchemy_url(business))
    try:
        with Session(engine) as session:
            session.execute(text("INSERT INTO business_rows VALUES ('before')"))
            with pytest.raises(EnqueueError, match=f"^{re.escape(field)}"):
                call(session, kwargs)
            session.execute(text("INSERT INTO business_rows VALUES ('after')"))
            session.commit()
    finally:
        engine.dispose()
    assert scalar(business, "SELECT count(*) FROM business_rows") == 2


def test_validate_is_a_unit_that_needs_no_connection():
    JobSpec(type="t", payload=nested(MAX_PAYLOAD_DEPTH - 1), priority=-5, delay=0,
            max_attempts=3, version=2, idempotency_key="k", concurrency_key="c").validate()
    with pytest.raises(EnqueueError, match="^run_at"):
        JobSpec(type="t", payload={}, delay=1, run_at=__import__("datetime").datetime.now()
                ).validate()


def test_the_largest_accepted_values_are_stored(conn, clean_db):
    from jobwarden.worker.jobs.job_spec import MAX_DELAY_SECONDS, MAX_KEY_CHARS

    job_id = enqueue(conn, "t", nested(MAX_PAYLOAD_DEPTH - 1), delay=MAX_DELAY_SECONDS,
                     concurrency_key="c" * MAX_KEY_CHARS, idempotency_key="i" * MAX_KEY_CHARS,
                     priority=2**31 - 1)
    conn.commit()
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE id = %s", [job_id]) == 1


@pytest.mark.parametrize("field", ["run_at", "expires_at"])
@pytest.mark.parametrize("when", [at(2030, 1, 1, hours=-20), at(2030, 1, 1, hours=23),
                                  FIRST_INSTANT, LAST_INSTANT],
                         ids=["offset-20h", "offset+23h", "first-instant", "last-instant"])
def test_any_offset_and_each_end_of_the_range_is_stored_as_its_instant(
        conn, clean_db, field, when):
    """Sent as given, an offset beyond ±15:59 was refused by PostgreSQL, aborting the
    caller's transaction; it is sent in UTC."""
    job_id = enqueue(conn, "t", {}, **{field: when})
    conn.commit()
    column = {"run_at": "available_at"}.get(field, field)
    stored = scalar(clean_db, f"SELECT {column} FROM background_jobs WHERE id = %s", [job_id])
    assert stored == when and stored.astimezone(UTC) == when.astimezone(UTC)
