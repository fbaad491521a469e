"""A handler that logs, for the chaos test of a worker killed mid-attempt
(tests/chaos/test_attempt_log_kill.py): its first attempt logs and then sleeps until the
test kills the worker; its second logs and completes in its business transaction."""

from __future__ import annotations

import logging
import time

from jobwarden import job
from tests.apps.chaos_app import FAST, note

log = logging.getLogger("shop.orders")


@job("logs.killed", queue="chaos", lease=1, timeout=60, max_attempts=3, backoff=FAST)
def killed(ctx, payload):
    for i in range(5):
        ctx.log.info("attempt %d line %d", ctx.attempt, i)
    log.warning("attempt %d token=tok_secret_123456 logged", ctx.attempt)
    note(ctx, "started")  # after its lines: the test kills it once this is written
    if ctx.attempt == 1:
        time.sleep(60)
    with ctx.transaction() as tx:
        tx.execute("SELECT 1")
