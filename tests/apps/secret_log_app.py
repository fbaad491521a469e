"""A job that logs secrets the way real handlers do, to check the worker's log redaction."""

import logging

from worker import PermanentError, job

log = logging.getLogger("shop.payments")


@job("leaky_log", max_attempts=1)
def leaky_log(ctx, payload):
    ctx.log.warning("calling https://bob:hunter2secret@api.example.com/charge")
    log.warning("retrying with Authorization: Bearer q1w2e3r4t5 and key sk_live_4eC39HqLyjWDarjtT1zdp7dc")
    try:
        raise ValueError("upstream said password=swordfish42")
    except ValueError:
        log.exception("upstream failed")
    raise PermanentError("DECLINED", "card_number=4242424242424242 declined")
