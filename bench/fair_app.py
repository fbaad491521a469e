"""The job type of bench/bench_fair.py: `bench.tenant`, keyed by its payload's `tenant`
when JOBWARDEN_BENCH_FAIR is 1 (the default) and plain otherwise (today's FIFO claim),
each job `JOBWARDEN_BENCH_WORK_MS` of work (default 0: the queue, not the work)."""

import os
import time

from jobwarden import job

FAIR = os.environ.get("JOBWARDEN_BENCH_FAIR", "1") == "1"
WORK = float(os.environ.get("JOBWARDEN_BENCH_WORK_MS", "0")) / 1000


@job("bench.tenant", lease=30, **({"fair_key": "tenant"} if FAIR else {}))
def tenant(ctx, payload):
    if WORK:
        time.sleep(WORK)
