"""A job that records when it ran, to check per-key serialization across processes."""

import time

from jobwarden import job


@job("serial", lease=30)
def serial(ctx, payload):
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO key_runs (job_id, key, started) VALUES (%s, %s, clock_timestamp())",
                     [ctx.job_id, payload.get("key")])
    time.sleep(0.05)  # the work: long enough for a second job of the key to overlap
    with ctx._pool.connection() as conn:
        conn.execute("UPDATE key_runs SET finished = clock_timestamp() WHERE job_id = %s",
                     [ctx.job_id])
