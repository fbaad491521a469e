"""Jobs that record when they run, to check per-key limits across worker processes.

`kl.pair` lets two jobs of a key run at once, `kl.single` one (the default). A keyed job
records its start in `limit_runs`, then holds its slot until both hold:

- its key has been seen running at its limit (`limit_reached`): a key with room
  for two must really get two, or the job waits;
- every key of the run (`payload["keys"]`) has started a job: a key whose jobs sit behind
  another key's whole backlog is started while that key is busy, or nobody finishes.

So a claim that under-used a limit, or starved a key, shows up as a job that waited out
`BARRIER_SECONDS`. That job records the miss and every job stops waiting, so the run ends
and the test finds the barrier's conditions unmet in the records.
"""

import time

from jobwarden import job

#: Longest a job holds its slot waiting for the barrier (a failing run, not a passing one).
BARRIER_SECONDS = 30
WORK_SECONDS = 0.02

BARRIER = """
    SELECT (SELECT count(*) FROM limit_runs WHERE key = %(key)s AND finished IS NULL),
           (SELECT count(DISTINCT key) FROM limit_runs WHERE key = ANY(%(keys)s)),
           EXISTS (SELECT 1 FROM limit_reached WHERE key = %(key)s),
           EXISTS (SELECT 1 FROM limit_barrier_missed)
"""


def run(ctx, payload: dict, limit: int) -> None:
    key = payload.get("key")
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO limit_runs (job_id, key, started) "
                     "VALUES (%s, %s, clock_timestamp())", [ctx.job_id, key])
    if key is not None:
        hold_until_barrier(ctx, key, payload["keys"], limit)
    time.sleep(WORK_SECONDS)
    with ctx._pool.connection() as conn:
        conn.execute("UPDATE limit_runs SET finished = clock_timestamp() WHERE job_id = %s",
                     [ctx.job_id])


def hold_until_barrier(ctx, key: str, keys: list[str], limit: int) -> None:
    deadline = time.monotonic() + BARRIER_SECONDS
    while time.monotonic() < deadline:
        with ctx._pool.connection() as conn:
            running, started_keys, reached, missed = conn.execute(
                BARRIER, {"key": key, "keys": keys}).fetchone()
            if running >= limit and not reached:
                conn.execute("INSERT INTO limit_reached (key) VALUES (%s) "
                             "ON CONFLICT DO NOTHING", [key])
                reached = True
        if missed or (reached and started_keys == len(keys)):
            return
        time.sleep(0.01)
    with ctx._pool.connection() as conn:
        conn.execute("INSERT INTO limit_barrier_missed (job_id) VALUES (%s)", [ctx.job_id])


@job("kl.pair", lease=30, concurrency_limit=2)
def pair(ctx, payload):
    run(ctx, payload, 2)


@job("kl.single", lease=30)
def single(ctx, payload):
    run(ctx, payload, 1)
