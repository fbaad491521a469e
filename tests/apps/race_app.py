"""Handlers for the multi-process claim race: each execution logs itself, unguarded,
so a job run twice would show up twice in race_log."""

import os

from jobwarden import job


@job("race", lease=30)
def race(ctx, payload):
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO race_log (job_id, execution_id, pid) VALUES (%s, %s, %s)",
                      [ctx.job_id, ctx.execution_id, os.getpid()])
