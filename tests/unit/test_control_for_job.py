"""ExecutionControl.for_job, the executor's constructor (once per job), passes a claimed
job's fields on by position: it must make the control the keywords make, each field in
its place."""

from __future__ import annotations

import uuid

from jobwarden.worker.engine.context import ExecutionControl, JobContext
from jobwarden.worker.engine.producer import ClaimedJob


def state(control: ExecutionControl) -> dict[str, object]:
    """Every slot's value but the lock, and its ctx's attributes but the control."""
    out = {name: getattr(control, name) for name in ExecutionControl.__slots__
           if name not in ("_lock", "ctx") and hasattr(control, name)}
    out["ctx"] = (type(control.ctx), {k: v for k, v in vars(control.ctx).items()
                                      if k != "_control"})
    return out


def test_for_job_makes_the_control_the_keywords_make():
    # Every field a value of its own, so a field passed in another's place shows.
    job = ClaimedJob(id=11, queue="q", type="t", version=3, payload={}, priority=0,
                     attempt=2, max_attempts=7, execution_id=uuid.uuid4(),
                     checkpoint={"at": 5}, idempotency_key="key", snoozes=4,
                     concurrency_key="ck", batch_id=13, trace_context="trace")
    pool = object()
    made = ExecutionControl.for_job(job, pool=pool, timeout=30.0, async_pool=None,  # type: ignore[arg-type]
                                    started=100.0)
    keywords = ExecutionControl(
        pool=pool, job_id=job.id, execution_id=job.execution_id, attempt=job.attempt,  # type: ignore[arg-type]
        max_attempts=job.max_attempts, type=job.type, queue=job.queue, version=job.version,
        checkpoint=job.checkpoint, job_idempotency_key=job.idempotency_key, timeout=30.0,
        snoozes=job.snoozes, async_pool=None, started=100.0,
        concurrency_key=job.concurrency_key, batch_id=job.batch_id,
        trace_context=job.trace_context)
    assert state(made) == state(keywords)
    assert (made.job_id, made.attempt, made.max_attempts, made.version, made.snoozes,
            made.batch_id, made.deadline) == (11, 2, 7, 3, 4, 13, 130.0)
    assert (made.type, made.queue, made.concurrency_key, made.trace_context) == (
        "t", "q", "ck", "trace")
    assert isinstance(made.ctx, JobContext) and made.ctx.checkpoint == {"at": 5}
    assert made.ctx.idempotency_key("x") == keywords.ctx.idempotency_key("x")
