"""Durable totals of rare runtime events per job type (`job_event_totals`, read by the
console's /metrics): executions recovered from lost workers, and zombie executions —
those that carried on after another execution had taken their job over.

Recovery adds to its total in the transaction that recovers (`RECOVERED`).
Zombies are counted where the runtime learns of one, in a statement of their own that
runs only then, so an execution that owns its job costs nothing extra:

- `zombie_outcome`: its outcome write matched no row (the completer's batch, or the
  handler's business transaction), the outcome was refused;
- `zombie_lease`: a heartbeat, or the handler's own progress or effect write, found the
  lease gone before it finished, and its result is discarded.

Each zombie execution is counted once. A count is lost, never doubled, if the database
is unreachable at that moment or the process dies between the refusal and the count.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg_pool import ConnectionPool

from jobwarden.worker.core.dberrors import DB_UNREACHABLE
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.event_totals")

RECOVERED = "recovered"
ZOMBIE_OUTCOME = "zombie_outcome"
ZOMBIE_LEASE = "zombie_lease"


def count(conn: psycopg.Connection, event: str, types: list[str]) -> None:
    """Add one to `event`'s total for each entry of `types` (one statement on `conn`)."""
    if types:
        JobStore(conn).rows(Q.count_events, {"event": event, "types": types})


def count_on(pool: ConnectionPool, event: str, types: list[str]) -> None:
    """count() on a connection of `pool`; a database error only costs the count."""
    if not types:
        return
    try:
        with pool.connection() as conn:
            count(conn, event, types)
    except DB_UNREACHABLE as exc:
        log.warning("could not count %d %s event(s): %s", len(types), event, exc)
