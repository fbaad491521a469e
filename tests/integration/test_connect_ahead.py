"""A worker's dedicated connections are opened together while it registers
(DedicatedConnection.open_ahead, worker/process.py run): the first use takes the
connection made ahead, never a second one; a failure ahead is the first use's to meet, as
if nothing had been tried; and a connection opened ahead and never used is closed by
`drop`, as a worker that never started closes its own."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from jobwarden.worker.store.db import DedicatedConnection
from tests.helpers import scalar, wait_for

#: Nothing listens on port 1: a connection there is refused at once.
NOWHERE = "postgresql://postgres@127.0.0.1:1/postgres"


def _sessions(url: str, name: str) -> int:
    return scalar(url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                  [name])


def test_the_first_use_takes_the_connection_made_ahead(clean_db):
    """Used at once, as a worker's claim may be: a first use that connected again beside
    the one under way would leave a session behind (several rounds: it is a race)."""
    name = f"ahead-{uuid.uuid4().hex[:8]}"
    for _ in range(5):
        conn = DedicatedConnection(clean_db, application_name=name)
        conn.open_ahead()
        first = conn.get()
        assert first.execute("SELECT 1").fetchone() == (1,)
        assert conn.get() is first
        conn.drop()
    wait_for(lambda: _sessions(clean_db, name) == 0, timeout=2,
             message="no session left behind")


def test_a_failure_ahead_is_met_by_the_first_use():
    conn = DedicatedConnection(NOWHERE)
    conn.open_ahead()
    with pytest.raises(psycopg.OperationalError):
        conn.get()


def test_a_connection_opened_ahead_and_never_used_is_closed_by_drop(clean_db):
    name = f"ahead-{uuid.uuid4().hex[:8]}"
    conn = DedicatedConnection(clean_db, application_name=name)
    conn.open_ahead()
    conn.drop()
    assert _sessions(clean_db, name) == 0
