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
    # Long enough that no worker drains the lot before the others have started (the test
    # checks that three of them took part): 1,500 jobs are 3.75 s of one worker's 4 slots.
    time.sleep(0.01)
