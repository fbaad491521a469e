"""The expiry duty: end the jobs not started by their deadline (docs/guide/uniqueness.md).

A job's deadline (`expires_at`, from `expires_at=` at enqueue or its type's
`expires_after`) is enforced by the claims themselves: they never start a job past it,
however late this duty runs. This duty only gives such jobs their final state, so that
they stop counting as pending and show on Failed: `failed`, code EXPIRED, without an
execution (none started). Failed rather than cancelled: nobody decided against the work;
the system did not get to it in time, which is what Failed is watched for, and an
operator's retry runs it after all (the retry clears the deadline).

A job running at its deadline is not touched: its timeout governs it. Every worker may
run the duty: it skips rows others hold and re-checks each row's state as it writes.
"""

from __future__ import annotations

import logging

from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import CallerConnection, Q

log = logging.getLogger("jobwarden.duties")

#: Jobs ended per transaction, and transactions per pass: a pass never holds many row
#: locks, and a large expired backlog is ended over several passes.
BATCH = 1000
MAX_BATCHES = 10


def expire(conn: CallerConnection, *, batch: int = BATCH,
           max_batches: int = MAX_BATCHES) -> int:
    """End the pending jobs past their deadline, `batch` per transaction on `conn`
    (outside a transaction), at most `max_batches` transactions; returns how many."""
    store = JobStore(conn)
    ended = 0
    for _ in range(max_batches):
        with conn.transaction():
            rows = store.rows(Q.expire_jobs, {"limit": batch})
            # As an operator's failing of a job: its run_anyway dependents run, the
            # others wait (held by a failed parent), and its batch counts it.
            parents = [r[0] for r in rows if r[2]]
            if parents:
                store.rows(Q.release_dependents, {"parent_ids": parents,
                                                  "as_completed": False})
            members = [r[0] for r in rows if r[3] is not None]
            if members:
                store.rows(Q.batch_count, {"job_ids": members, "close_ids": None})
        ended += len(rows)
        if len(rows) < batch:
            break
    if ended:
        log.info("%d job(s) expired before they started", ended,
                 extra={"action": "jobs_expired", "count": ended})
    return ended
