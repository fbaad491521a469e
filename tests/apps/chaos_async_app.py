"""The chaos handlers as `async def` coroutines, under the same names and policies.

A worker started with `--app tests.apps.chaos_async_app` runs these in place of the
thread handlers of tests/apps/chaos_app.py, so a chaos test parametrized over the two
apps (tests/chaos/support.py, HANDLER_APPS) checks the same guarantee for both kinds.
They write the same tables the same way; their own bookkeeping runs on a thread
(asyncio.to_thread), as a real coroutine handler's blocking work must. `chaos.stuck`
blocks its loop on purpose: the stall a blocking call inside a coroutine causes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from jobwarden import JobType, job, registry
from tests.apps import chaos_app
from tests.apps.chaos_app import note

# Importing chaos_app registered its thread handlers: these take their names.
registry.clear()

AsyncHandler = Callable[[Any, Any], Coroutine[Any, Any, Any]]


def twin(of: JobType) -> Callable[[AsyncHandler], JobType]:
    """Register a coroutine handler with `of`'s name and policy."""
    return job(of.name, queue=of.queue, lease=of.lease, timeout=of.timeout,
               max_attempts=of.max_attempts, backoff=of.backoff, repeat_safe=of.repeat_safe)


async def anote(ctx, event: str) -> int:
    return await asyncio.to_thread(note, ctx, event)


async def order(ctx) -> None:
    """The business write that commits with the completion, on an AsyncConnection."""
    async with ctx.transaction() as tx:
        await tx.execute("INSERT INTO chaos_orders (job_id, execution_id) VALUES (%s, %s)",
                         [ctx.job_id, ctx.execution_id])


@twin(chaos_app.sleep_job)
async def sleep_job(ctx, payload):
    run = await anote(ctx, "started")
    await asyncio.sleep(payload.get("first_seconds", 0) if run == 1
                        else payload.get("seconds", 0))
    await order(ctx)
    await anote(ctx, "returned")


@twin(chaos_app.plain_job)
async def plain_job(ctx, payload):
    await asyncio.to_thread(chaos_app.note_decided_start, ctx)
    await asyncio.sleep(payload.get("seconds", 0.05))


@twin(chaos_app.quick_job)
async def quick_job(ctx, payload):
    await asyncio.sleep(payload.get("seconds", 0))
    await order(ctx)


@twin(chaos_app.stuck_job)
async def stuck_job(ctx, payload):
    """Blocks its event loop in a synchronous call: no await, so no cancellation reaches
    it, and every coroutine of its lane waits too. Only the heartbeat thread still runs."""
    await anote(ctx, "started")
    time.sleep(payload.get("seconds", 600))
    await anote(ctx, "returned")


@job("chaos.stubborn", queue="chaos", lease=1, timeout=1, max_attempts=2,
     backoff=chaos_app.FAST)
async def stubborn_job(ctx, payload):
    """Catches the CancelledError of its timeout and goes on awaiting: only abandonment
    frees its slot. (A coroutine-only type: a thread cannot be cancelled at all.)"""
    await anote(ctx, "started")
    while True:
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError as exc:
            await anote(ctx, "swallowed:" + type(exc).__name__)


@twin(chaos_app.beat_forever_job)
async def beat_forever_job(ctx, payload):
    """Heartbeats and reports progress forever, ignoring cancel_requested; its task is
    cancelled at its timeout (CancelledError at its next await)."""
    await anote(ctx, "started")
    i = 0
    try:
        while True:
            await ctx.heartbeat()
            await ctx.progress(processed=i)
            i += 1
            await asyncio.sleep(0.05)
    except BaseException as exc:
        await asyncio.shield(anote(ctx, "stopped:" + type(exc).__name__))
        raise


@twin(chaos_app.cancellable_job)
async def cancellable_job(ctx, payload):
    """Works in small steps and stops when cancellation is requested: by noticing
    cancel_requested, or by its task being cancelled at an await."""
    run = await anote(ctx, "started")
    steps = payload.get("steps", 2000)
    try:
        for _ in range(int(payload.get("first_steps", steps) if run == 1 else steps)):
            ctx.raise_if_cancelled()
            await asyncio.sleep(0.02)
    except BaseException:
        if ctx.cancel_requested:
            await asyncio.shield(anote(ctx, "cancel_seen"))
        raise
    await anote(ctx, "returned")


@twin(chaos_app.charge_job)
async def charge_job(ctx, payload):
    await anote(ctx, "started")
    key = ctx.idempotency_key("charge")
    effect = await ctx.effect(key, provider_idempotent=payload.get("provider_idempotent",
                                                                   False))
    if not effect.done:
        object_id = await asyncio.to_thread(chaos_app.provider_charge, ctx, key,
                                            payload["amount"])
        if ctx.attempt == 1 and payload.get("die") == "after_provider":
            chaos_app.die()
        await effect.complete({"object_id": object_id})
    await order(ctx)
    if ctx.attempt == 1 and payload.get("die") == "before_completion":
        chaos_app.die()
