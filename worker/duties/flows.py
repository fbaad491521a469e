"""The flows' repair duty: release what no finish released.

A dependent is released by the statement that gives its parent its final status
(finish_executions, an operator's action): that is the normal path, and this duty is
not it. It catches what that path could not: a parent finished by a runtime from before
flows (its finish knows no edges), a follow-up release lost with its connection between
two autocommit statements (worker/engine/completer.py, `_parents`), a waiting job whose
count was written as zero by hand. Every worker may run it: each step is a set-based
statement whose row locks and `released_at` make a second run a no-op.
"""

from __future__ import annotations

import logging

from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import CallerConnection, Q

log = logging.getLogger("jobwarden.duties")

#: Parents repaired per pass: a backlog left by an older runtime drains over passes.
BATCH = 500


def repair(conn: CallerConnection, limit: int = BATCH) -> int:
    """One pass (its own transaction on `conn`); returns the jobs it released."""
    store = JobStore(conn)
    with conn.transaction():
        parents = [r[0] for r in store.rows(Q.flow_unreleased_parents, {"limit": limit})]
        released = store.rows(Q.release_dependents, {"parent_ids": parents,
                                                     "as_completed": False}) if parents else []
        stray = store.rows(Q.flow_release_stray)
    count = len(released) + len(stray)
    if count:
        log.warning("released %d waiting job(s) whose parents had all completed", count,
                    extra={"action": "flows_repaired", "count": count})
    return count
