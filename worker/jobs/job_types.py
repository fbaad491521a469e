"""Published job-type policies: the handler's declaration holds wherever a job is enqueued.

`@job(...)` declares a type's policy in the application's code, but jobs are also
enqueued by processes that never import the handler (another service, the CLI, a
script). So a worker publishes the policies of the types it handles to `job_types`
when it starts (`publish_job_types`), and:

- `enqueue` of a type it does not know locally reads the defaults from there
  (`with_published_policies`); arguments given at enqueue still win;
- a type nobody has published yet gets the documented defaults (queue "default",
  5 attempts, version 1), and the job records which fields took them
  (`policy_defaults`); a worker of the type claims such a job as its own policy has it
  (claim_jobs), and its duty brings the rest over in small batches (`adopt_defaulted`),
  never in one statement at start-up (docs/architecture.md §5);
- the console reads SLA targets from the table, with no application import;
- an enqueue applies a published type's uniqueness window, debounce and expiry
  (`unique_for`, `replace`, `expires_after`) as the handler's process would.

Timeout, lease, backoff and repeat safety are never stored per job: the worker that
runs a job always applies its own handler's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

import psycopg

from jobwarden.worker.core.policy import RetryPolicy
from jobwarden.worker.jobs.registry import JobType, Registry
from jobwarden.worker.store.jobstore import JobStore, Steps, run_steps
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.job_types")

#: The fields `enqueue` fills from a policy when the caller does not give them, and so
#: the ones a worker may fill in later for a job enqueued while no policy was known.
POLICY_FIELDS = ("queue", "max_attempts")


def policy_row(job_type: JobType, published_by: str) -> dict[str, Any]:
    """A type's declared policy as one `job_types` row."""
    backoff = job_type.backoff
    return {"type": job_type.name, "queue": job_type.queue,
            "max_attempts": job_type.max_attempts, "timeout_seconds": job_type.timeout,
            "lease_seconds": job_type.lease,
            "backoff": {"base": backoff.base, "cap": backoff.cap, "jitter": backoff.jitter},
            "sla_seconds": job_type.sla, "version": job_type.version,
            "repeat_safe": job_type.repeat_safe,
            "concurrency_limit": job_type.concurrency_limit, "rate_limit": job_type.rate_limit,
            "rate_burst": job_type.rate_burst, "rate_limit_key": job_type.rate_limit_key,
            "unique_for_seconds": job_type.unique_for, "replace": job_type.replace,
            "expires_after_seconds": job_type.expires_after,
            "fair_key": job_type.fair_key, "fair_weights": job_type.fair_weights or None,
            "published_by": published_by}


#: Jobs per adopt_defaulted transaction, and transactions per pass: a pass never holds
#: many row locks, and a backlog of 100,000 defaulted jobs is spread over many passes
#: (while claims take the jobs at the head of the queue without it).
ADOPT_BATCH = 500
ADOPT_MAX_BATCHES = 4


def publish_job_types(conn: psycopg.Connection, types: Iterable[JobType],
                      published_by: str) -> dict[str, int]:
    """Publish these types' policies. Rewrites no job: see `adopt_defaulted`.

    Runs in the caller's transaction (a psycopg connection). Returns how many types were
    written (a newer version's policy is left alone).
    """
    rows = [policy_row(t, published_by) for t in types]
    if not rows:
        return {"published": 0}
    published = JobStore(conn).rows(Q.job_types_publish, {"rows": json.dumps(rows)})
    return {"published": len(published)}


def adopt_defaulted(conn: psycopg.Connection, names: Iterable[str], *,
                    batch: int = ADOPT_BATCH, max_batches: int = ADOPT_MAX_BATCHES) -> int:
    """Give pending jobs of these types that took the documented defaults their published
    policy, `batch` jobs per transaction, at most `max_batches` transactions; returns how
    many moved. `conn`: a psycopg connection outside a transaction (commits each batch).

    Claims need none of this (they apply their worker's policy themselves); it is so that
    what reads a pending job's stored queue (console counts, `jobwarden stats`) soon
    agrees with what the claims do."""
    names = sorted(set(names))
    moved = 0
    for _ in range(max_batches if names else 0):
        with conn.transaction():
            rows = JobStore(conn).rows(Q.job_types_adopt_defaulted,
                                       {"types": names, "batch": batch})
        moved += len(rows)
        if len(rows) < batch:
            break
    if moved:
        log.info("%d pending job(s) enqueued before their policy was known now follow it",
                 moved, extra={"action": "policy_adopted", "count": moved})
    return moved


def published_policies(conn: Any, names: Iterable[str]) -> dict[str, JobType]:
    """The published policies of these types, as handler-less JobTypes."""
    return run_steps(JobStore(conn), published_policies_steps(names))


def published_policies_steps(names: Iterable[str]) -> Steps[dict[str, JobType]]:
    """published_policies as Steps, for sync and async callers alike."""
    names = sorted(set(names))
    if not names:
        return {}
    columns, rows = yield Q.job_types_get, {"types": names}
    found = {}
    for r in (dict(zip(columns, row, strict=True)) for row in rows):
        found[r["type"]] = JobType(
            name=r["type"], handler=_not_here, queue=r["queue"],
            max_attempts=r["max_attempts"], timeout=r["timeout_seconds"],
            lease=r["lease_seconds"], backoff=RetryPolicy(**r["backoff"]),
            sla=r["sla_seconds"], version=r["version"], repeat_safe=r["repeat_safe"],
            concurrency_limit=r["concurrency_limit"], unique_for=r["unique_for_seconds"],
            replace=r["replace"], expires_after=r["expires_after_seconds"],
            fair_key=r["fair_key"], fair_weights=dict(r["fair_weights"] or {}))
    return found


def with_published_policies(conn: Any, names: Iterable[str], local: Registry) -> Registry:
    """`local`, plus the published policy of each named type it does not hold.

    Costs no query when every type is known locally (the usual case in an application
    that imports its handlers).
    """
    return run_steps(JobStore(conn), with_published_policies_steps(names, local))


def with_published_policies_steps(names: Iterable[str], local: Registry) -> Steps[Registry]:
    """with_published_policies as Steps, for sync and async callers alike."""
    missing = {n for n in names if isinstance(n, str) and n not in local}
    if not missing:
        return local
    merged = Registry()
    for job_type in local:
        merged.register(job_type)
    for job_type in (yield from published_policies_steps(missing)).values():
        merged.register(job_type)
    return merged


def defaulted_fields(given: dict[str, Any], known: Registry, type_name: str) -> list[str]:
    """The policy fields a job takes from the documented defaults: those not given
    at enqueue, when no policy for its type is known at all."""
    if type_name in known:
        return []
    return [f for f in POLICY_FIELDS if given.get(f) is None]


def _not_here(ctx: Any, payload: Any) -> Any:  # a published policy carries no handler
    raise RuntimeError("a published job-type policy has no handler in this process")
