"""A fair-share type whose executions log themselves, unguarded, so a job run twice (two
workers' fair claims taking one row) would show up twice in fair_log."""

import os
import time

from jobwarden import job


@job("fair.race", lease=30, fair_key="tenant")
def fair_race(ctx, payload):
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO fair_log (job_id, execution_id, pid, tenant) "
                     "VALUES (%s, %s, %s, %s)",
                     [ctx.job_id, ctx.execution_id, os.getpid(), payload.get("tenant")])
    time.sleep(0.002)
