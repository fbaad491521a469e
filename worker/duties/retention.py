"""Retention as a duty: workers delete old finished jobs in small batches.

Completed jobs go after 14 days, skipped and cancelled after 30, failed after 90 (the
dead letters stay longest); `JOBWARDEN_RETENTION` changes them (`completed=7d,failed=180d`,
or `off`). Each batch is one short transaction that first takes a transaction-level
advisory lock, so one worker at a time prunes and no lock outlives its batch; a batch
deletes at most `batch` jobs with their executions (in the same statement) and their `done`
effect-ledger entries. Audit rows stay, their job_id set NULL. A job's age runs from the
moment it reached its current status (migration 0017). A parent stays while a dependent
of it has not ended (docs/guide/flows.md); its edges go with it. `jobwarden prune` is
the one-off command: the same batches (`prune`), run until nothing is left.

Job batches (docs/guide/flows.md#batches) go after the jobs, in transactions of the same
size: one that has ended longer ago than the shortest of the jobs' ages, with none of
its members left and no callback job unfinished, goes with its callbacks (migration
0075).

The execution history is not deleted row by row: its weekly partitions are dropped once
every row in them is older than the history's age (`executions=...`; by default the
longest of the jobs' ages) and no job still here has an execution in them: a job still
kept keeps all its attempts, however long ago the first was (migration 0071). So each
pass deletes the jobs first and drops weeks after. A deleted job's history stays until
its week goes (migration 0066).
"""

from __future__ import annotations

import logging
import time

import psycopg

from jobwarden.worker.core.retention_policy import DAY as DAY
from jobwarden.worker.core.retention_policy import DEFAULT_AGES as DEFAULT_AGES
from jobwarden.worker.core.retention_policy import RetentionPolicy
from jobwarden.worker.duties import partitions
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.retention")


def run_once(conn: psycopg.Connection, policy: RetentionPolicy,
             drop_history: bool = True) -> dict[str, int] | None:
    """One retention pass; returns jobs deleted per status, or None when another worker
    holds the retention lock. `conn`: a psycopg connection; commits after each batch.
    Then (`drop_history`) the history's partitions past `policy.history_age` go."""
    deleted = dict.fromkeys(policy.ages, 0)
    effects = 0
    for _ in range(policy.max_batches):
        progressed = False
        for status, age in policy.ages.items():
            with conn.transaction():
                store = JobStore(conn)
                if not store.one(Q.retention_try_lock)[0]:
                    return None
                jobs, gone_effects = store.one(Q.retention_delete_batch, {
                    "status": status, "older_than": age, "batch": policy.batch})
            deleted[status] += jobs
            effects += gone_effects
            progressed = progressed or jobs == policy.batch
        if not progressed:  # every status ran out of old jobs in this round
            break
    # After the jobs: a job batch goes once its last member has (None: another worker
    # took the lock meanwhile, and its pass does them).
    job_batches = delete_job_batches(conn, policy) or 0
    if any(deleted.values()) or job_batches:
        log.info("retention deleted %s (and %d done ledger entries, %d job batches)",
                 deleted, effects, job_batches,
                 extra={"action": "retention_pruned", "deleted": deleted, "effects": effects,
                        "job_batches": job_batches})
    if drop_history:  # after the jobs: a week goes only once no job left here holds it
        partitions.drop_expired(conn, policy.history_age)
    return deleted


def delete_job_batches(conn: psycopg.Connection, policy: RetentionPolicy) -> int | None:
    """Delete the ended job batches (job_batches) none of whose members is left,
    `policy.batch` per transaction, at most `policy.max_batches` transactions; returns
    how many went, or None when another worker holds the retention lock."""
    gone = 0
    for _ in range(policy.max_batches):
        with conn.transaction():
            store = JobStore(conn)
            if not store.one(Q.retention_try_lock)[0]:
                return None
            deleted = store.one(Q.retention_delete_job_batches, {
                "older_than": policy.batch_age, "batch": policy.batch})[0]
        gone += deleted
        if deleted < policy.batch:
            break
    return gone


def count_prunable(conn: psycopg.Connection, statuses: list[str],
                   older_than: float) -> dict[str, int]:
    """How many jobs of each of `statuses` `prune` would delete now (0 for none)."""
    counts = dict.fromkeys(statuses, 0)
    counts.update(dict(JobStore(conn).rows(Q.retention_count,
                                           {"statuses": statuses, "older_than": older_than})))
    return counts


def prune(conn: psycopg.Connection, statuses: list[str], older_than: float,
          wait: float = 0.5) -> dict[str, int]:
    """Delete every job of `statuses` that reached it more than `older_than` seconds ago,
    in retention's batches (so its done ledger entries go too, and no lock is held long);
    waits while a worker's retention pass holds the lock. Returns jobs deleted per status."""
    policy = RetentionPolicy(ages=dict.fromkeys(statuses, older_than), max_batches=1)
    deleted = dict.fromkeys(statuses, 0)
    while True:
        # The history's weeks follow the workers' own retention, not a one-off prune.
        batch = run_once(conn, policy, drop_history=False)
        if batch is None:
            time.sleep(wait)  # a worker's pass is under way; its batches are short
            continue
        for status, n in batch.items():
            deleted[status] += n
        if all(n < policy.batch for n in batch.values()):
            return deleted
