"""The one list of "the database is away" errors, and the reconnect backoff every
surviving loop shares (worker/core/dberrors.py)."""

from __future__ import annotations

import psycopg
from psycopg_pool import PoolTimeout

from jobwarden.worker.core.dberrors import DB_UNREACHABLE, Backoff


def test_a_backoff_doubles_to_its_cap_and_starts_over_when_reset():
    backoff = Backoff(first=0.5, cap=3.0)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_an_empty_pool_and_a_lost_connection_count_as_unreachable_a_refused_value_not():
    def caught(exc: Exception) -> bool:
        try:
            raise exc
        except DB_UNREACHABLE:
            return True
        except Exception:
            return False

    assert caught(PoolTimeout("no connection in 5 s"))
    assert caught(psycopg.OperationalError("server closed the connection"))
    assert caught(psycopg.InterfaceError("the connection is closed"))
    assert not caught(psycopg.errors.CheckViolation("refused"))
    assert not caught(psycopg.DataError("bad value"))
