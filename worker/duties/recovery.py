"""Recovery of lost executions: `running` is only a lease.

A job whose lease ran out without a heartbeat lost its worker (killed, OOM, frozen,
cut off). It goes back to `pending` with backoff (WORKER_LOST, the attempt counted),
to `failed` when its attempts are used up, or to `unknown` when its type declared
itself unsafe to repeat (worker/core/transitions.py decides). Any number of workers may run
this at once: rows are locked with SKIP LOCKED and the UPDATE re-checks staleness and
the execution it saw, so a job that completed meanwhile is never overwritten.
"""

from __future__ import annotations

import logging

from jobwarden.worker.core.errors import WORKER_LOST
from jobwarden.worker.core.policy import DEFAULT_POLICY
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.core.transitions import lost
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.jobs.registry import Registry
from jobwarden.worker.store.event_totals import RECOVERED, count
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import CallerConnection, Q

log = logging.getLogger("jobwarden.recovery")


def recover_pass(conn: CallerConnection, registry: Registry, *,
                 stale_after: float) -> dict[str, int]:
    """One pass, as each worker's heartbeat thread runs it every `recovery_interval`: every
    worker's expired leases recovered, silent workers marked gone; counts by new status."""
    counts = recover_stale_running(conn, registry)
    mark_gone_workers(conn, stale_after=stale_after)
    return counts


#: Jobs one recovery transaction locks and moves.
RECOVERY_BATCH = 500
#: Most such transactions one recovery runs: it goes on while they come back full, so a
#: lost worker's whole buffer (up to `--buffer` claimed jobs, 2,000 by default) is back
#: in one recovery, not one batch per recovery interval, and no transaction holds
#: thousands of row locks. 10,000 jobs at most; the next interval takes the rest.
MAX_RECOVERY_BATCHES = 20


def recover_stale_running(conn: CallerConnection, registry: Registry,
                          limit: int = RECOVERY_BATCH,
                          max_batches: int = MAX_RECOVERY_BATCHES) -> dict[str, int]:
    """Recover every expired lease (at most `max_batches` transactions of `limit` jobs);
    returns counts by new status."""
    counts: dict[str, int] = {}
    for _ in range(max_batches):
        if _recover_batch(conn, registry, limit, counts) < limit:
            break
    if counts:
        log.warning("recovered %d job(s) whose worker was lost: %s", sum(counts.values()), counts,
                    extra={"action": "jobs_recovered", "error_code": WORKER_LOST, **counts})
    return counts


def _recover_batch(conn: CallerConnection, registry: Registry, limit: int,
                   counts: dict[str, int]) -> int:
    """One recovery transaction: up to `limit` expired leases locked and moved, each
    counted in `counts` by its new status; returns how many it locked."""
    with conn.transaction():
        stale = JobStore(conn).rows(Q.lock_stale_running, {"limit": limit})
        if not stale:
            return 0
        decided = []
        for job_id, execution_id, type_name, attempts, max_attempts, worker, beat in stale:
            job_type = registry.get(type_name)
            status = lost(attempts, max_attempts,
                          repeat_safe=job_type is None or job_type.repeat_safe)
            delay = ((job_type.backoff if job_type else DEFAULT_POLICY).delay_for(attempts)
                     if status is JobStatus.PENDING else 0.0)
            decided.append(Completion(
                job_id=job_id, execution_id=execution_id, type=type_name, attempt=attempts,
                lease=0.0, status=status, outcome=ExecutionOutcome.WORKER_LOST,
                error_code=WORKER_LOST, delay=delay, lapsed_only=True,
                error=f"lease expired: no heartbeat from worker {worker or '?'} "
                      f"since {beat or '?'}"))
        # The same write as every other way out of running, guarded by the lease as well
        # (a worker may have renewed it since the lock was taken: then it is not lost).
        moved = write_batch(conn, decided)
        types = [c.type for c in decided if c.execution_id in moved]
        if types:
            count(conn, RECOVERED, types)  # the recovered total per type (/metrics)
        for moved_to in moved.values():
            counts[moved_to] = counts.get(moved_to, 0) + 1
    return len(stale)


def mark_gone_workers(conn: CallerConnection, stale_after: float) -> list[str]:
    """Mark workers whose own heartbeat is older than `stale_after` seconds as gone."""
    with conn.transaction():
        gone = [r[0] for r in JobStore(conn).rows(Q.mark_gone_workers,
                                                  {"stale_after": stale_after})]
    if gone:
        log.warning("workers gone (no heartbeat for %ss): %s", stale_after, gone,
                    extra={"action": "workers_gone", "count": len(gone)})
    return gone
