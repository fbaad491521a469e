"""Jobs that record when their handler ran (not when they were claimed: a claimed job
may wait in its lane's buffer), one type per queue. A `gated` job holds its slot until
the test opens the gate, so a test can keep a lane's slots busy for as long as it needs."""

import time

from jobwarden import job

LEASE = 2  # short, so a lease the heartbeat failed to renew would be recovered quickly


def _record(ctx, sql: str, params: list) -> None:
    with ctx._pool.connection() as conn:
        conn.execute(sql, params)


def _gate_open(ctx) -> bool:
    with ctx._pool.connection() as conn:
        return bool(conn.execute("SELECT bool_or(open) FROM lane_gate").fetchone()[0])


def _run(ctx, payload):
    _record(ctx, "INSERT INTO lane_runs (job_id, queue, started) "
                 "VALUES (%s, %s, clock_timestamp())", [ctx.job_id, ctx.queue])
    while payload.get("gated") and not ctx.cancel_requested and not _gate_open(ctx):
        time.sleep(0.05)
    _record(ctx, "UPDATE lane_runs SET finished = clock_timestamp() WHERE job_id = %s",
            [ctx.job_id])


for _queue in ("email", "reports", "default", "other"):
    job(f"{_queue}.work", queue=_queue, lease=LEASE, timeout=600)(_run)
