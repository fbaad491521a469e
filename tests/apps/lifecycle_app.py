"""One job type per way an execution ends, for the JSON log test: each handler runs for
at least PAUSE seconds, so every logged duration has a known lower bound."""

import time

from jobwarden import PermanentError, RetryableError, SkipJob, job

PAUSE = 0.05


@job("lc.ok")
def ok(ctx, payload):
    time.sleep(PAUSE)


@job("lc.flaky", max_attempts=2, backoff=0)
def flaky(ctx, payload):
    time.sleep(PAUSE)
    if ctx.attempt == 1:
        raise RetryableError("UPSTREAM_502", "bad gateway")


@job("lc.declined", max_attempts=1)
def declined(ctx, payload):
    time.sleep(PAUSE)
    raise PermanentError("DECLINED", "card declined")


@job("lc.gone")
def gone(ctx, payload):
    time.sleep(PAUSE)
    raise SkipJob("the order was deleted")


# A short lease makes the heartbeat, which enforces timeouts, beat often.
@job("lc.slow", max_attempts=1, timeout=0.2, lease=1)
def slow(ctx, payload):
    ctx.wait_cancelled(30)  # until the timeout asks it to stop
