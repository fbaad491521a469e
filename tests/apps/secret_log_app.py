"""A job that logs secrets the way real handlers do, to check the worker's log redaction."""

import logging

from jobwarden import PermanentError, RetryableError, job

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


#: Error codes glued to a secret, the way a handler builds them from a provider's answer.
#: The payload names the shape only, so the database holds the secret nowhere but where
#: the runtime writes the code.
SECRET_CODES = {"stripe": "DECLINED_sk_live_4eC39HqLyjWDarjtT1zdp7dc",
                "password": "E_password=swordfish42",
                "aws": "E_AKIAIOSFODNN7EXAMPLE"}
#: What the handler also logs as structured fields, nested.
FIELD_SECRETS = ("tok_visa_4242abcd", "q1w2e3r4t5", "hunter2secret")


@job("leaky_code", max_attempts=2, backoff=0.1)
def leaky_code(ctx, payload):
    code = SECRET_CODES[payload["shape"]]
    log.warning("provider declined", extra={
        "action": "provider_declined", "provider_code": code,
        "card": {"token": "tok_visa_4242abcd", "last4": "4242"},
        "headers": ["Authorization: Bearer q1w2e3r4t5"],
        "upstream": {"url": "https://bob:hunter2secret@api.example.com/charge"}})
    if payload["shape"] == "password":
        raise RetryableError(code, "try again")  # a retry, then a failure: both are written
    raise PermanentError(code, "declined")


@job("long_code", max_attempts=1)
def long_code(ctx, payload):
    # 3,000 characters, distinct per job: a code built from a provider's whole answer.
    raise PermanentError(f"E_{payload['n']}_" + "UPSTREAM_SAID_" * 214)
