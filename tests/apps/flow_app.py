"""Jobs of a flow that record when each execution started, for the flows' chaos test's
oracle (tests/chaos/test_flows.py): a dependent must never start before a parent
completed. `flow.join` also records what its parents returned."""

import json
import time

from jobwarden import job


def create_tables(conn) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS flow_starts (job_id bigint NOT NULL, "
                 "at timestamptz NOT NULL DEFAULT clock_timestamp())")
    conn.execute("CREATE TABLE IF NOT EXISTS flow_joins (job_id bigint PRIMARY KEY, "
                 "results jsonb NOT NULL)")
    conn.commit()


def _started(ctx) -> None:
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO flow_starts (job_id) VALUES (%s)", [ctx.job_id])


@job("flow.step", lease=2, max_attempts=50)
def step(ctx, payload):
    _started(ctx)
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
