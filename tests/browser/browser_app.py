"""The job handlers the browser tests' real worker runs."""

import os

from jobwarden import RetryableError, RetryPolicy, job


@job("browser_task", queue="browser", lease=30)
def browser_task(ctx, payload):
    ctx.progress({"done": 1, "total": 1})


#: The file whose existence means the CRM's token was renewed (the worker's environment
#: names it): until then every sync fails with AUTH_FAILED and waits for another attempt.
CRM_FIXED = "BROWSER_CRM_FIXED"


@job("sync_crm", queue="browser", lease=30, max_attempts=3,
     backoff=RetryPolicy(base=300, jitter=0))
def sync_crm(ctx, payload):
    fixed = os.environ.get(CRM_FIXED)
    if not (fixed and os.path.exists(fixed)):
        raise RetryableError("AUTH_FAILED", "CRM answered 401: the API token expired")
