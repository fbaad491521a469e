"""Demo job types: a small product's background work, with the failures real work meets.

`jobwarden demo` registers these; `jobwarden worker --app jobwarden.worker.demo_jobs` runs them.
Handlers are fast and deterministic so the demo settles in seconds.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from jobwarden.worker import (
    AmbiguousOutcome,
    JobContext,
    PermanentError,
    RateLimited,
    RetryableError,
    RetryPolicy,
    SkipJob,
    job,
)

QUICK = RetryPolicy(base=1, cap=4, jitter=0.2)  # demo retries come back within seconds


@job("send_email", queue="email", max_attempts=5, timeout=30, lease=10, sla="30s",
     backoff=QUICK)
def send_email(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Sends once even if run twice: the ledger remembers the effect by a stable key."""
    if payload.get("flaky") and ctx.attempt == 1:
        raise RetryableError("NETWORK_TIMEOUT", "SMTP connect timed out after 10s")
    effect = ctx.effect(ctx.idempotency_key("smtp"))
    if not effect.done:
        effect.complete({"message_id": f"<{ctx.job_id}.{payload['userId']}@demo>"})


@job("generate_pdf", queue="reports", max_attempts=3, timeout=60, lease=10, sla="2m",
     backoff=QUICK)
def generate_pdf(ctx: JobContext, payload: dict[str, Any]) -> None:
    """A long job: reports progress and resumes from its checkpoint after a crash."""
    pages = int(payload.get("pages", 10))
    start = (ctx.checkpoint or {}).get("page", 0)
    for page in range(start, pages):
        time.sleep(0.15)  # render a page
        ctx.save_checkpoint({"page": page + 1})  # the page is written: safe to resume after
        ctx.progress(processed=page + 1, total=pages)
        ctx.raise_if_cancelled()


@job("sync_crm", queue="integrations", max_attempts=5, backoff=QUICK, sla="5m")
def sync_crm(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise PermanentError(
        "AUTH_FAILED",
        "HTTP 401 from https://sync:tok3n-s3cret@crm.example.com/api/v2/contacts: token revoked")


@job("provider_call", queue="integrations", max_attempts=3, backoff=QUICK, sla="1m")
def provider_call(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise RetryableError("PROVIDER_5XX", "HTTP 503 Service Unavailable from provider")


class Charge(BaseModel):
    """A typed payload: enqueue refuses a charge without a positive amount."""

    orderId: int  # noqa: N815  (the payload's JSON field name)
    amount: int = Field(gt=0, description="in cents")


@job("charge_card", queue="payments", max_attempts=5, backoff=QUICK, sla="1m",
     repeat_safe=False, payload=Charge)
def charge_card(ctx: JobContext, charge: Charge) -> None:
    """Rate-limited once; the provider dedupes by our idempotency key, so a retry is safe."""
    if ctx.attempt == 1:
        raise RateLimited(2, "HTTP 429 Too Many Requests (Retry-After: 2)")
    effect = ctx.effect(ctx.idempotency_key("charge"), provider_idempotent=True)
    if not effect.done:
        effect.complete({"charge_id": f"ch_{ctx.job_id}", "amount": charge.amount})


@job("call_webhook", queue="integrations", max_attempts=5, backoff=QUICK)
def call_webhook(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise AmbiguousOutcome(
        f"POST {payload['url']} timed out after the receiver accepted the body; "
        "delivery unknown")


@job("project_report", queue="reports", max_attempts=3, backoff=QUICK)
def project_report(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise SkipJob(f"project {payload['projectId']} was archived before the report ran")


@job("export_data", queue="reports", max_attempts=3, backoff=QUICK)
def export_data(ctx: JobContext, payload: dict[str, Any]) -> float:
    rows: list[float] = payload["rows"]
    return sum(rows) / len(rows)  # a bug: empty exports divide by zero


@job("send_reminder", queue="email", version=2, backoff=QUICK, sla="1m")
def send_reminder(ctx: JobContext, payload: dict[str, Any]) -> None:
    if "channel" not in payload:
        raise PermanentError("PAYLOAD_INVALID", "channel missing")


@send_reminder.upgrader(from_version=1)
def reminder_v1_to_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """v1 payloads ({"userId"}) were queued before the release that added channels."""
    return {"user_id": payload["userId"], "channel": "email"}
