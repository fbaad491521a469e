"""Reconciliation hooks: a job type may say whether an ambiguous operation happened.

A job ends `unknown` when its execution could not tell whether its external effect took
place (AmbiguousOutcome, or a lost worker of a type that is not `repeat_safe`). A type
may declare `reconciler=fn`: `fn(job)` looks the operation up by its business reference
(the payload, the idempotency key) and answers DONE, NOT_DONE or UNKNOWN.

- DONE: the job is marked completed; NOT_DONE: it is retried (running it is safe now);
  UNKNOWN, or a reconciler that raises: it stays for a person to decide, and its row
  says so (`reconcile_verdict`: 'unknown', or 'error' for a reconciler that raised or
  answered something else), for Needs review to group by.
- Each decision is an operator action with its audit row (`mark_completed` / `retry`,
  or `reconcile` when the verdict left the job unknown: once per change of verdict),
  whose actor is whoever asked: `jobwarden reconcile --auto` (cli:$USER), or the
  console's operator through a `jobwarden.reconcile` job that a worker with the handlers
  runs (the console imports no application code).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobwarden.worker.jobs.registry import JobType, Registry
from jobwarden.worker.store.jobstore import JobStore, UnreadableJson, read_jsonb
from jobwarden.worker.store.queries import CallerConnection, Q

if TYPE_CHECKING:
    from jobwarden.worker.engine.context import JobContext

log = logging.getLogger("jobwarden.reconcile")

DONE, NOT_DONE, UNKNOWN = "done", "not_done", "unknown"
#: What an unknown job's row records of a reconciler that raised or answered something
#: else (its verdict is UNKNOWN: the job stays for a person).
ERROR = "error"
#: The job type through which the console asks a worker to run reconcilers.
RECONCILE_TYPE = "jobwarden.reconcile"


@dataclass(frozen=True)
class ReviewJob:
    """What a reconciler gets: the unknown job's identity and business reference."""

    id: int
    type: str
    queue: str
    payload: dict[str, Any]
    idempotency_key: str | None
    attempts: int
    last_error_code: str | None
    last_error: str | None


def reconcilable_types(registry: Registry) -> list[str]:
    return sorted(t.name for t in registry if t.reconciler is not None)


def reconcile(conn: CallerConnection, registry: Registry, *, actor: str, role: str = "admin",
              job_id: int | None = None, limit: int = 100,
              note: str | None = None) -> dict[str, list[int]]:
    """Run the reconcilers of unknown jobs (or of `job_id` alone), in the caller's
    transaction; returns job ids by verdict (done / not_done / unknown). `note`, the
    requester's reason, is added to each audit row's reason."""
    # Here, not at the top: every worker imports this module (register_reconcile_job),
    # and the operator actions it would bring along are for reconciling alone
    # (tests/unit/test_worker_imports.py).
    from jobwarden.worker.ops.operations import mark_completed, retry_job

    asked = f" (requested: {note})" if note else ""
    verdicts: dict[str, list[int]] = {DONE: [], NOT_DONE: [], UNKNOWN: []}
    for row in JobStore(conn).dicts(Q.reconcile_candidates, {
            "types": reconcilable_types(registry), "job_id": job_id, "limit": limit}):
        job = ReviewJob(**{**row, "payload": read_jsonb(row["payload"])})
        said = _ask(registry, job)
        verdict = UNKNOWN if said == ERROR else said
        if verdict == DONE:
            mark_completed(conn, job.id, actor=actor, role=role,
                           reason=f"reconciler of {job.type}: the operation happened{asked}")
        elif verdict == NOT_DONE:
            retry_job(conn, job.id, actor=actor, role=role, expected_status="unknown",
                      reason=f"reconciler of {job.type}: the operation did not happen; "
                             f"running it again{asked}")
        else:
            if said == UNKNOWN:
                what = "could not tell"
            elif isinstance(job.payload, UnreadableJson):
                what = f"not asked: {job.payload.reason}"
            else:
                what = "failed"
            JobStore(conn).rows(Q.reconcile_verdict_record, {
                "job_id": job.id, "verdict": said, "actor": actor, "role": role,
                "reason": f"reconciler of {job.type}: {what}; it needs a person{asked}"})
        verdicts[verdict].append(job.id)
        log.info("job %s %s reconciled: %s", job.id, job.type, verdict,
                 extra={"action": "job_reconciled", "job_id": job.id, "job_type": job.type,
                        "verdict": verdict})
    return verdicts


def request_reconcile(conn: CallerConnection, *, actor: str, role: str, reason: str,
                      request_id: str | None = None) -> int:
    """Ask a worker with the handlers to run the reconcilers, as `actor`, in the caller's
    transaction; returns the `jobwarden.reconcile` job's id. Each operator gets a job of
    their own (a second request while theirs is pending folds into it), so the decisions
    are audited as whoever asked; each request is audited when it is made, a resubmitted
    form once. The reason is redacted before it is stored, in the row and the payload."""
    # Here, not at the top: see reconcile().
    from jobwarden.worker.jobs.enqueue import enqueue
    from jobwarden.worker.ops.operations import _already_done, _check  # as above

    reason = _check(actor, role, reason)
    job_id = int(enqueue(conn, RECONCILE_TYPE,
                         {"actor": actor, "role": role, "reason": reason},
                         idempotency_key=f"reconcile:console:{actor}"))
    if not (request_id and _already_done(conn, "request_reconcile", request_id, actor,
                                         job_id=job_id)):
        JobStore(conn).rows(Q.reconcile_requested, {
            "job_id": job_id, "actor": actor, "role": role, "reason": reason,
            "request_id": request_id})
    return job_id


def _ask(registry: Registry, job: ReviewJob) -> str:
    """The reconciler's verdict, or ERROR when there is none here, it raised or it
    answered something else."""
    if isinstance(job.payload, UnreadableJson):
        # An empty payload could read as "not done" and run the job again: a person
        # decides (the console shows the payload as unread, and why).
        log.warning("job %s: %s; its reconciler is not asked, still unknown", job.id,
                    job.payload.reason, extra={"action": "reconciler_failed",
                                               "job_id": job.id})
        return ERROR
    job_type = registry.get(job.type)
    reconciler = job_type.reconciler if job_type is not None else None
    if reconciler is None:  # the candidates' types had one: this registry is another
        log.warning("job %s: no reconciler of %s here; still unknown", job.id, job.type,
                    extra={"action": "reconciler_failed", "job_id": job.id})
        return ERROR
    try:
        verdict: Any = reconciler(job)
    except Exception as exc:  # the external system may be down: ask again later
        log.warning("job %s: reconciler of %s failed (%s); still unknown", job.id, job.type,
                    exc, extra={"action": "reconciler_failed", "job_id": job.id})
        return ERROR
    if verdict not in (DONE, NOT_DONE, UNKNOWN):
        log.warning("job %s: reconciler of %s answered %r, not done/not_done/unknown",
                    job.id, job.type, verdict, extra={"action": "reconciler_failed",
                                                      "job_id": job.id})
        return ERROR
    return str(verdict)


def register_reconcile_job(registry: Registry) -> None:
    """Give the registry the `jobwarden.reconcile` job type when one of its types has a
    reconciler: the console enqueues one to have a worker with the handlers run them. The
    worker process calls this at start (the registry itself imports no feature)."""
    if RECONCILE_TYPE in registry or not any(t.reconciler for t in registry):
        return

    def run_reconcilers(ctx: JobContext, payload: dict[str, Any]) -> None:
        with ctx.transaction() as conn:
            reconcile(conn, registry, actor=payload["actor"], role=payload["role"],
                      job_id=payload.get("job_id"), note=payload.get("reason"))

    registry.register(JobType(name=RECONCILE_TYPE, handler=run_reconcilers, max_attempts=3,
                              timeout=300.0))
