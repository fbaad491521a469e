"""The database is away: which errors say so, and how long to wait before trying again.

`DB_UNREACHABLE` is the one list of errors that mean "the database cannot be reached
right now" (a lost or refused connection, a pool with no connection to give:
psycopg_pool's PoolTimeout is an OperationalError). Every loop of the runtime that
survives an outage — the claim, the completer's write, LISTEN, registering the worker —
catches these and waits by a `Backoff`; every other error is a bug or a refused value,
and is not retried as if the server were away.
"""

from __future__ import annotations

import psycopg

DB_UNREACHABLE = (psycopg.OperationalError, psycopg.InterfaceError)


class Backoff:
    """Waits that double from `first` up to `cap` while an outage lasts; `reset()` when the
    database answers again. Not thread-safe: one per loop."""

    __slots__ = ("first", "cap", "current")

    def __init__(self, first: float = 0.5, cap: float = 10.0) -> None:
        self.first, self.cap, self.current = first, cap, first

    def next(self) -> float:
        """The wait before the next try; the one after will be twice as long (to `cap`)."""
        wait = self.current
        self.current = min(self.current * 2, self.cap)
        return wait

    def reset(self) -> None:
        self.current = self.first
