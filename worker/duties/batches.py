"""The batches' repair duty: count what no finish counted.

A member's outcome is counted into its batch in the transaction that writes it
(worker/engine/completer.py, an operator's action): that is the normal path, and this
duty is not it. It catches what that path could not: a member finished by a runtime
from before batches (its finish knows no batch), or a status written by hand. Such a
member's status differs from what it was counted as, and a partial index holds only
those, so a pass costs an empty index scan when there is nothing to do. Every worker
may run it: the count takes each member's and each batch's row lock and compares
again, so a second run, or one that meets a finish, counts nothing twice.
"""

from __future__ import annotations

import logging

from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import CallerConnection, Q

log = logging.getLogger("jobwarden.duties")

#: Members counted per pass: a backlog left by an older runtime drains over passes.
BATCH = 1000


def repair(conn: CallerConnection, limit: int = BATCH) -> int:
    """One pass (its own transaction on `conn`); returns the members it counted."""
    store = JobStore(conn)
    with conn.transaction():
        ids = [r[0] for r in store.rows(Q.batch_uncounted, {"limit": limit})]
        fired = store.rows(Q.batch_count, {"job_ids": ids, "close_ids": None}) if ids else []
    if ids:
        log.warning("counted %d batch member(s) no finish had counted; %d callback(s) "
                    "came due", len(ids), len(fired),
                    extra={"action": "batches_repaired", "count": len(ids)})
    return len(ids)
