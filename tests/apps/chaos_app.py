"""Handlers for the chaos tier: jobs that run long, die, hang, ignore their timeout,
heartbeat forever, resume from checkpoints and produce external effects.

They tell the test what they do through small tables (created by `create_tables`):
- chaos_events: one row per thing a handler did (started, returned, ...), committed at once.
- chaos_provider: a fake external provider that dedupes by idempotency key, the way a
  payment API with an Idempotency-Key header does; `calls` counts every request.
- chaos_orders: a business write made in ctx.transaction(), so it commits with the
  job's completion or not at all.
- chaos_items: the units of work of a checkpointed job (no unique key: redone work shows).
- chaos_gates: a job whose row is here may go on (the test opens the gate).
Leases are 1-2 s and backoffs 0.1-0.2 s so faults resolve within seconds.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime

from jobwarden import RetryPolicy, job, registry

FAST = RetryPolicy(base=0.1, cap=0.2, jitter=0)

SCHEMA = """
DROP TABLE IF EXISTS chaos_events, chaos_provider, chaos_orders, chaos_items, chaos_gates;
CREATE TABLE chaos_events (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, execution_id uuid NOT NULL,
    attempt int NOT NULL, pid int NOT NULL, event text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    decided_at double precision);  -- when the worker decided to start it (time.monotonic())
CREATE TABLE chaos_provider (
    object_id bigserial PRIMARY KEY, idempotency_key text NOT NULL UNIQUE,
    job_id bigint NOT NULL, amount int NOT NULL, calls int NOT NULL DEFAULT 1);
CREATE TABLE chaos_orders (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, execution_id uuid NOT NULL);
CREATE TABLE chaos_items (job_id bigint NOT NULL, item int NOT NULL, execution_id uuid NOT NULL);
CREATE TABLE chaos_gates (job_id bigint PRIMARY KEY);
"""


def create_tables(conn) -> None:
    conn.execute(SCHEMA)
    conn.commit()


def note(ctx, event: str) -> int:
    """Record an event of this execution (committed now); returns how many executions of
    this job have started so far, this one included."""
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO chaos_events (job_id, execution_id, attempt, pid, event) "
                     "VALUES (%s, %s, %s, %s, %s)",
                     [ctx.job_id, ctx.execution_id, ctx.attempt, os.getpid(), event])
        return conn.execute("SELECT count(*) FROM chaos_events WHERE job_id = %s "
                            "AND event LIKE 'start%%'", [ctx.job_id]).fetchone()[0]


def die() -> None:
    """What an OOM kill or a segfault does to the worker: no cleanup, no goodbye."""
    os.kill(os.getpid(), signal.SIGKILL)


@job("chaos.sleep", queue="chaos", lease=1, timeout=60, max_attempts=5, backoff=FAST)
def sleep_job(ctx, payload):
    """Sleeps `first_seconds` on its first run and `seconds` afterwards (and
    `first_attempt_seconds` more in attempt 1: a job claimed but never started spent that
    one), without ever heartbeating itself (the worker keeps the lease), then writes an
    order."""
    run = note(ctx, "started")
    seconds = payload.get("first_seconds", 0) if run == 1 else payload.get("seconds", 0)
    if ctx.attempt == 1:
        seconds += payload.get("first_attempt_seconds", 0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)
    with ctx.transaction() as tx:
        tx.execute("INSERT INTO chaos_orders (job_id, execution_id) VALUES (%s, %s)",
                   [ctx.job_id, ctx.execution_id])
    note(ctx, "returned")


@job("chaos.handover", queue="chaos", lease=1, timeout=60, max_attempts=3, backoff=FAST)
def handover_job(ctx, payload):
    """Waits, then writes an order in the transaction that completes the job (or, with
    `"transaction": false`, writes nothing and returns: its outcome goes through the
    worker's completer). The first attempt waits until a second attempt has started:
    frozen past its lease, it returns right after waking. Later attempts wait until the
    test opens the job's gate, so they are still running when the first one wakes."""
    note(ctx, "started")
    if ctx.attempt == 1:
        sql = "SELECT count(*) >= 2 FROM chaos_events WHERE job_id = %s AND event = 'started'"
    else:
        sql = "SELECT count(*) > 0 FROM chaos_gates WHERE job_id = %s"
    deadline = time.monotonic() + payload.get("wait", 60)
    while True:
        with ctx._pool.connection() as conn:
            if conn.execute(sql, [ctx.job_id]).fetchone()[0]:
                break
        if time.monotonic() > deadline:
            raise RuntimeError(f"attempt {ctx.attempt} waited {payload.get('wait', 60)}s")
        time.sleep(0.05)
    if payload.get("transaction", True):
        with ctx.transaction() as tx:
            tx.execute("INSERT INTO chaos_orders (job_id, execution_id) VALUES (%s, %s)",
                       [ctx.job_id, ctx.execution_id])
    note(ctx, "returned")


@job("chaos.plain", queue="chaos", lease=2, timeout=30, max_attempts=25, backoff=FAST)
def plain_job(ctx, payload):
    """A plain handler (no effects ledger, no business transaction): it notes its start,
    with the moment the worker decided to start it (`ctx.started`, set right after the
    executor's lease check, on the machine's monotonic clock), and sleeps. Nothing but
    the worker stops it running twice."""
    note_decided_start(ctx)
    time.sleep(payload.get("seconds", 0.05))


def note_decided_start(ctx) -> None:
    """chaos.plain's record of its start, with when the worker decided it."""
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO chaos_events (job_id, execution_id, attempt, pid, event, "
                     "decided_at) VALUES (%s, %s, %s, %s, 'started', %s)",
                     [ctx.job_id, ctx.execution_id, ctx.attempt, os.getpid(), ctx.started])


@job("chaos.noop", queue="chaos", lease=2, timeout=30, max_attempts=3, backoff=FAST)
def noop_job(ctx, payload):
    """Does nothing: a worker that runs these learns its jobs take microseconds, and claims
    as far ahead as its buffer allows (worker/engine/producer.py, `ahead`)."""


@job("chaos.quick", queue="chaos", lease=2, timeout=30, max_attempts=25, backoff=FAST)
def quick_job(ctx, payload):
    """A short job whose business write commits together with its completion."""
    time.sleep(payload.get("seconds", 0))
    with ctx.transaction() as tx:
        tx.execute("INSERT INTO chaos_orders (job_id, execution_id) VALUES (%s, %s)",
                   [ctx.job_id, ctx.execution_id])


@job("chaos.poison", queue="chaos", lease=1, timeout=30, max_attempts=3, backoff=FAST)
def poison_job(ctx, payload):
    """Kills the worker running it, every time."""
    note(ctx, "started")
    die()


@job("chaos.stuck", queue="chaos", lease=1, timeout=1, max_attempts=2, backoff=FAST)
def stuck_job(ctx, payload):
    """Blocks in a call that checks nothing: ignores its timeout and cancellation."""
    note(ctx, "started")
    time.sleep(payload.get("seconds", 600))
    note(ctx, "returned")


@job("chaos.beat_forever", queue="chaos", lease=1, timeout=1.5, max_attempts=2, backoff=FAST)
def beat_forever_job(ctx, payload):
    """Heartbeats and reports progress forever, ignoring cancel_requested: only the
    execution timeout ends it."""
    note(ctx, "started")
    i = 0
    try:
        while True:
            ctx.heartbeat()
            ctx.progress(processed=i)
            i += 1
            time.sleep(0.05)
    except BaseException as exc:
        note(ctx, "stopped:" + type(exc).__name__)
        raise


@job("chaos.cancellable", queue="chaos", lease=1, timeout=60, max_attempts=3, backoff=FAST)
def cancellable_job(ctx, payload):
    """Works in small steps (`first_steps` on its first run) and stops when cancellation
    is requested."""
    run = note(ctx, "started")
    steps = payload.get("steps", 2000)
    for _ in range(int(payload.get("first_steps", steps) if run == 1 else steps)):
        if ctx.cancel_requested:
            note(ctx, "cancel_seen")
            ctx.raise_if_cancelled()
        time.sleep(0.02)
    note(ctx, "returned")


@job("chaos.checkpointed", queue="chaos", lease=1, timeout=60, max_attempts=3, backoff=FAST)
def checkpointed_job(ctx, payload):
    """Processes items from its checkpoint on. Each item is committed before the
    checkpoint that moves past it is saved: a checkpoint never runs ahead of durable work."""
    total = int(payload["items"])
    start = ctx.checkpoint or 0
    run = note(ctx, f"start:{start}")
    delay = payload.get("first_delay", 0.05) if start == 0 and run == 1 else 0.0
    for item in range(start, total):
        with ctx._pool.connection() as conn:  # durable before the checkpoint moves on
            conn.execute("INSERT INTO chaos_items (job_id, item, execution_id) "
                         "VALUES (%s, %s, %s)", [ctx.job_id, item, ctx.execution_id])
        ctx.save_checkpoint(item + 1)
        ctx.progress(processed=item + 1, total=total)
        if delay:
            time.sleep(delay)


@job("chaos.unsafe", queue="chaos", lease=1, timeout=60, max_attempts=5, backoff=FAST,
     repeat_safe=False)
def unsafe_job(ctx, payload):
    """A job declared unsafe to repeat: if its worker is lost, nobody may run it again blindly."""
    note(ctx, "started")
    time.sleep(payload.get("seconds", 60))


def provider_charge(ctx, key: str, amount: int) -> int:
    """The fake provider: one object per idempotency key, however often it is called."""
    with ctx._pool.connection() as conn:
        return conn.execute(
            "INSERT INTO chaos_provider (idempotency_key, job_id, amount) VALUES (%s, %s, %s) "
            "ON CONFLICT (idempotency_key) DO UPDATE SET calls = chaos_provider.calls + 1 "
            "RETURNING object_id", [key, ctx.job_id, amount]).fetchone()[0]


@job("chaos.charge", queue="chaos", lease=1, timeout=30, max_attempts=3, backoff=FAST)
def charge_job(ctx, payload):
    """Charge through the provider once (effect ledger + stable idempotency key), then
    record the order in the transaction that completes the job. On its first attempt it
    dies where `payload["die"]` says: "after_provider" (the provider acted, the ledger
    does not know) or "before_completion" (ledger done, order and completion not)."""
    note(ctx, "started")
    key = ctx.idempotency_key("charge")
    effect = ctx.effect(key, provider_idempotent=payload.get("provider_idempotent", False))
    if not effect.done:
        object_id = provider_charge(ctx, key, payload["amount"])
        if ctx.attempt == 1 and payload.get("die") == "after_provider":
            die()
        effect.complete({"object_id": object_id})
    with ctx.transaction() as tx:
        tx.execute("INSERT INTO chaos_orders (job_id, execution_id) VALUES (%s, %s)",
                   [ctx.job_id, ctx.execution_id])
    if ctx.attempt == 1 and payload.get("die") == "before_completion":
        die()


def wait_for_gate(ctx, seconds: float = 60) -> None:
    """Wait until the test opens the job's gate (chaos_gates)."""
    deadline = time.monotonic() + seconds
    while True:
        with ctx._pool.connection() as conn:
            if conn.execute("SELECT count(*) > 0 FROM chaos_gates WHERE job_id = %s",
                            [ctx.job_id]).fetchone()[0]:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the gate of job {ctx.job_id} stayed shut {seconds}s")
        time.sleep(0.05)


@job("chaos.bad_values", queue="chaos", lease=2, timeout=60, max_attempts=1, backoff=FAST)
def bad_values_job(ctx, payload):
    """Hands over, between two writes (the throttle keeps them for the heartbeat), what
    PostgreSQL would refuse as JSON: a NaN in its progress (`"nan_progress"`; numpy,
    pandas and statistics give NaN for a ratio of nothing), or a saved checkpoint it
    then changes to hold a datetime (`"changed_checkpoint"`); then waits for its gate."""
    note(ctx, "started")
    if payload["kind"] == "nan_progress":
        ctx.progress(0, 10)  # written now: the next report waits for the heartbeat
        ctx.progress(1, 10, rate=float("nan"))
    else:
        cursor = {"page": 1}
        ctx.save_checkpoint(cursor)  # written now
        ctx.save_checkpoint(cursor)  # kept for the heartbeat
        cursor["seen_at"] = datetime.now(UTC)
    wait_for_gate(ctx)
    note(ctx, "returned")


@job("chaos.gated", queue="chaos", lease=2, timeout=60, max_attempts=3, backoff=FAST,
     repeat_safe=False)
def gated_job(ctx, payload):
    """Runs until its gate opens, relying on the worker's heartbeat for its lease; unsafe
    to repeat, so a lost lease would send it to `unknown`."""
    note(ctx, "started")
    wait_for_gate(ctx)
    note(ctx, "returned")


TYPES = [sleep_job, handover_job, noop_job, quick_job, poison_job, stuck_job,
         beat_forever_job, cancellable_job, checkpointed_job, unsafe_job, charge_job,
         bad_values_job, gated_job]


def ensure_registered() -> None:
    """Put the chaos types back in the process registry (other tests empty it), so that
    enqueue in the test process applies their policies (max_attempts)."""
    for job_type in TYPES:
        registry.register(job_type)
