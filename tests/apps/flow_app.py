"""Jobs of a flow that record when each execution started, for the flows' chaos tests'
oracle (tests/chaos/test_flows.py): a dependent must never start before a parent
completed (a `flow.step` may fail its first attempt and be retried: it is then pending
for a while, and still holds its dependents). `flow.join` also records what its parents returned; `flow.pair` returns only
once the other parent of its pair runs too, so the two finish at the same moment. The
batches' callback (tests/apps/batch_app.py) is registered too, for a batch of steps."""

import json
import time

from jobwarden import job
from tests.apps import batch_app  # noqa: F401  (batch.callback, for a batch of steps)

#: How long a `flow.pair` waits for its partner before it fails (and is retried).
PARTNER_WAIT = 30.0


def create_tables(conn) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS flow_starts (job_id bigint NOT NULL, "
                 "at timestamptz NOT NULL DEFAULT clock_timestamp())")
    conn.execute("CREATE TABLE IF NOT EXISTS flow_joins (job_id bigint PRIMARY KEY, "
                 "results jsonb NOT NULL)")
    conn.execute("CREATE TABLE IF NOT EXISTS flow_pairs (pair int NOT NULL, "
                 "job_id bigint NOT NULL)")
    conn.commit()


def _started(ctx) -> None:
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO flow_starts (job_id) VALUES (%s)", [ctx.job_id])


@job("flow.step", lease=2, max_attempts=50, backoff=0.2)
def step(ctx, payload):
    _started(ctx)
    if payload.get("fail_first") and ctx.attempt == 1:
        raise RuntimeError("a first attempt that fails: the step goes back to pending")
    time.sleep(payload.get("sleep", 0.01))
    return {"step": ctx.job_id}


@job("flow.join", lease=2, max_attempts=50)
def join(ctx, payload):
    _started(ctx)
    results = ctx.parent_results()
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO flow_joins (job_id, results) VALUES (%s, %s) "
                     "ON CONFLICT (job_id) DO UPDATE SET results = EXCLUDED.results",
                     [ctx.job_id, json.dumps({str(k): v for k, v in results.items()})])
    return {"joined": len(results)}


@job("flow.pair", lease=5, max_attempts=50)
def pair(ctx, payload):
    """Meet the other parent of pair `payload["pair"]`, then return at once: both
    finishes then reach their dependent's row together."""
    _started(ctx)
    with ctx._pool.connection() as conn:  # committed as the block ends: the partner sees it
        conn.execute("INSERT INTO flow_pairs (pair, job_id) VALUES (%s, %s)",
                     [payload["pair"], ctx.job_id])
    deadline = time.monotonic() + PARTNER_WAIT
    while True:
        with ctx._pool.connection() as conn:
            met = conn.execute("SELECT count(DISTINCT job_id) FROM flow_pairs WHERE pair = %s",
                               [payload["pair"]]).fetchone()[0] >= 2
        if met:
            return {"pair": payload["pair"]}
        if time.monotonic() > deadline:
            raise RuntimeError(f"the other parent of pair {payload['pair']} never started")
        time.sleep(0.002)
