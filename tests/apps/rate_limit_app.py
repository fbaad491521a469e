"""A rate-limited job type, to check the limit across worker processes.

`rl.tick` may be claimed `RATE` times a second across all workers (its bucket holds one
second's worth). Its handler writes `rl_done` in the transaction that completes the job,
so a job whose worker was killed mid-run leaves no row and a job done twice shows twice.
`rl.free` has no limit: it shares the workers and must not be held back.
"""

import time

from jobwarden import job

RATE = 20
SLEEP = 0.02

TABLES = """
    CREATE TABLE IF NOT EXISTS rl_done (job_id bigint NOT NULL, execution_id uuid NOT NULL,
                                        type text NOT NULL)
"""


def _work(ctx, payload):
    time.sleep(payload.get("sleep", SLEEP))
    with ctx.transaction() as tx:
        tx.execute("INSERT INTO rl_done (job_id, execution_id, type) VALUES (%s, %s, %s)",
                   [ctx.job_id, ctx.execution_id, ctx.type])


@job("rl.tick", rate_limit=f"{RATE}/s", lease=2, timeout=30, max_attempts=5)
def tick(ctx, payload):
    _work(ctx, payload)


@job("rl.free", lease=2, timeout=30, max_attempts=5)
def free(ctx, payload):
    _work(ctx, payload)
