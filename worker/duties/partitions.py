"""The execution history's weekly partitions: made ahead of time, dropped when old.

`job_executions` is partitioned by the week its rows finished (migration 0066). A row
whose week has no partition cannot be written once the default partition (the history
from before the migration) is gone, so every worker keeps `WEEKS_AHEAD` weeks ready, at
start and then hourly; creating one that exists is a no-op, so workers need not agree
on who does it. Retention (retention.py) drops the weeks older than the history's age
that hold no attempt of a job still kept (migration 0071): one short lock and a file
unlinked, instead of a DELETE per execution. The log lines of the executions that went
(job_execution_logs, migration 0087) are deleted in the same transaction.
"""

from __future__ import annotations

import logging

import psycopg

from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.partitions")

WEEKS_AHEAD = 4


def ensure(conn: psycopg.Connection, weeks: int = WEEKS_AHEAD) -> list[str]:
    """Create the weeks from this one until `weeks` ahead that are missing; returns
    their names. Commits."""
    with conn.transaction():
        made = [name for (name,) in JobStore(conn).rows(Q.ensure_execution_partitions,
                                                        {"days": 7 * weeks})]
    if made:
        log.info("made history partitions %s", ", ".join(made),
                 extra={"action": "partitions_made", "partitions": made})
    return made


def drop_expired(conn: psycopg.Connection, older_than: float) -> list[str]:
    """Drop the history's partitions whose rows all finished more than `older_than`
    seconds ago and that hold no execution of a job still in background_jobs; returns
    their names. Commits. A lock that is not granted in time (lock_timeout) drops
    nothing this pass."""
    try:
        with conn.transaction():
            store = JobStore(conn)
            dropped = [name for (name,) in store.rows(
                Q.drop_execution_partitions, {"older_than": older_than})]
            # The log lines of the executions that went (now, or in a pass that failed
            # after its drop): every pass, in the drop's transaction.
            logs = store.one(Q.drop_execution_logs, {"older_than": older_than})[0]
    except psycopg.errors.LockNotAvailable:
        log.info("history partitions not dropped this pass: job_executions is busy",
                 extra={"action": "partitions_busy"})
        return []
    if dropped or logs:
        log.info("dropped history partitions %s (and %d executions' log lines)",
                 ", ".join(dropped) or "none", logs,
                 extra={"action": "partitions_dropped", "partitions": dropped,
                        "execution_logs": logs})
    return dropped
