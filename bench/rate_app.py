"""A rate-limited job type for bench/bench_rate_limit.py: `bench.limited` at
`JOBWARDEN_BENCH_RATE` jobs per second (default 200) across all workers, each job a few
milliseconds of work (`JOBWARDEN_BENCH_WORK_MS`, default 5)."""

import os
import time

from jobwarden import job

RATE = float(os.environ.get("JOBWARDEN_BENCH_RATE", "200"))
WORK = float(os.environ.get("JOBWARDEN_BENCH_WORK_MS", "5")) / 1000


@job("bench.limited", rate_limit=RATE, lease=30)
def limited(ctx, payload):
    time.sleep(WORK)
