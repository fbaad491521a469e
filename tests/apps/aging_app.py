"""A stream of priority-1 jobs that feeds itself faster than one small worker drains it:
each job takes 50 ms, then, while `aging_stream.running`, enqueues its successor, and
every fifth one a second successor too. The new jobs commit with the job's completion
(`ctx.transaction()`), so the stream never depends on the test process keeping up."""

import time

from jobwarden import JobSpec, enqueue_many, job


@job("aging.work", lease=30)
def work(ctx, payload):
    time.sleep(0.05)
    if "n" not in payload:
        return  # not part of the stream
    with ctx.transaction() as tx:
        if tx.execute("SELECT running FROM aging_stream").fetchone()[0]:
            n = payload["n"]
            enqueue_many(tx, [JobSpec("aging.work", {"n": n + 1}, priority=1)
                              for _ in range(2 if n % 5 == 0 else 1)])
