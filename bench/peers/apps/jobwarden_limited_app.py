"""Jobwarden's worker app for the ratelimit scenario alone: `bench_limited`, limited to
BENCH_RATE jobs/s across every worker process (its bucket one second's worth, the default
burst). A module of its own because a worker that handles a rate-limited type runs the
limited claim (its scopes' locks, its tokens) before every plain one: registered beside
the other scenarios' types, it would slow every other scenario's claims. The driver
(bench/peers/apps/jobwarden_app.py) enqueues it like any other kind."""

from __future__ import annotations

import time

from bench.peers.apps.common import LIMIT_RATE, LIMIT_WORK_SECONDS, write_stamp
from jobwarden import job


@job("bench_limited", rate_limit=LIMIT_RATE, lease=30)
def limited(ctx, payload):
    write_stamp(payload["i"])
    time.sleep(LIMIT_WORK_SECONDS)
