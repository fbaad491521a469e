"""The shop's three jobs. `jobwarden worker --app shop.jobs` runs them.

Each is written to be safe when it runs twice (a worker crash, a lost response, a retry):
docs/guide/writing-safe-jobs.md walks through them.
"""

from __future__ import annotations

import urllib.error
from decimal import Decimal

from pydantic import BaseModel, Field

from jobwarden import (
    AmbiguousOutcome,
    PermanentError,
    RateLimited,
    RetryableError,
    RetryPolicy,
    SkipJob,
    job,
)
from jobwarden.worker.store.db import connect
from shop import providers


class OrderRef(BaseModel):
    """Payload of the confirmation and CRM jobs: the order's id, never the order itself."""

    order_id: int = Field(gt=0)


class Charge(BaseModel):
    """Payload of charge_card, version 2: the amount in cents (version 1 sent a string)."""

    order_id: int = Field(gt=0)
    amount_cents: int = Field(gt=0)


@job("send_confirmation", queue="email", max_attempts=5, timeout=30, sla="30s",
     payload=OrderRef)
def send_confirmation(ctx, ref: OrderRef):
    # The mail goes out in the same transaction as the job's completion: if this execution
    # lost its job (its lease ran out while it was frozen), the row rolls back with it.
    # The UNIQUE (order_id, kind) constraint makes a second attempt insert nothing.
    with ctx.transaction() as tx:
        sent = tx.execute(
            "INSERT INTO shop_outbox (order_id, kind, recipient, subject) "
            "SELECT id, 'confirmation', email, 'Your order #' || id || ' is confirmed' "
            "FROM shop_orders WHERE id = %s "
            "ON CONFLICT (order_id, kind) DO NOTHING RETURNING id", [ref.order_id]).fetchone()
        if sent is None and not _order_exists(tx, ref.order_id):
            raise SkipJob(f"order {ref.order_id} no longer exists")


@job("charge_card", queue="payments", max_attempts=5, timeout=30, sla="1m", version=2,
     payload=Charge, backoff=RetryPolicy(base=1, cap=60))
def charge_card(ctx, charge: Charge):
    # The business key names the payment, not the attempt: every retry (and a second job
    # for the same order) sends the same Idempotency-Key, so the provider charges once.
    key = f"shop:order:{charge.order_id}:charge"
    try:
        resp = providers.call("/payments", {"amount_cents": charge.amount_cents},
                              idempotency_key=key)
    except (TimeoutError, urllib.error.URLError) as exc:
        # Did the charge happen? Unknown, but the same key makes asking again safe.
        raise RetryableError("PAYMENT_UNREACHABLE", str(exc)) from exc
    if resp.status >= 500:
        raise RetryableError("PAYMENT_5XX", f"provider answered {resp.status}")
    if resp.status != 200:
        raise PermanentError("PAYMENT_REJECTED", f"{resp.status}: {resp.body.get('error')}")
    with ctx.transaction() as tx:
        # Compare-and-set: only a placed order becomes paid, so two executions cannot
        # both record a payment; the CHECK constraint ties 'paid' to a charge id.
        paid = tx.execute(
            "UPDATE shop_orders SET status = 'paid', charge_id = %s "
            "WHERE id = %s AND status = 'placed' RETURNING id",
            [resp.body["id"], charge.order_id]).fetchone()
        if paid is None:  # already paid: by this charge (a repeat), or by another (a bug)
            row = tx.execute("SELECT charge_id FROM shop_orders WHERE id = %s",
                             [charge.order_id]).fetchone()
            if row is None:
                raise PermanentError("ORDER_NOT_FOUND", f"order {charge.order_id}")
            if row[0] != resp.body["id"]:
                raise PermanentError("PAID_TWICE", f"order {charge.order_id} has another charge")


@charge_card.upgrader(from_version=1)
def charge_v1_to_v2(payload: dict) -> dict:
    """Version 1 payloads, still queued during a deploy, carried "amount": "12.50"."""
    return {"order_id": payload["order_id"],
            "amount_cents": int(Decimal(payload["amount"]) * 100)}


@job("sync_crm", queue="crm", max_attempts=4, timeout=30, sla="5m",
     payload=OrderRef, backoff=RetryPolicy(base=0.5, cap=30))
def sync_crm(ctx, ref: OrderRef):
    # The CRM has no idempotency keys, so the effects ledger remembers whether the contact
    # was created. A repeat after success returns here; a crash after the call and before
    # complete() leaves the entry reserved, and the next attempt ends in `unknown`.
    effect = ctx.effect(f"shop:order:{ref.order_id}:crm")
    if effect.done:
        return
    with connect() as conn:
        row = conn.execute("SELECT email FROM shop_orders WHERE id = %s",
                           [ref.order_id]).fetchone()
    if row is None:
        effect.release()
        raise SkipJob(f"order {ref.order_id} no longer exists")
    try:
        resp = providers.call("/crm/contacts", {"email": row[0], "order_id": ref.order_id})
    except TimeoutError as exc:
        # The CRM may have created the contact and we never heard: a person checks.
        raise AmbiguousOutcome(f"CRM did not answer: {exc}", code="CRM_TIMEOUT") from exc
    except urllib.error.URLError as exc:
        effect.release()  # the connection was refused: nothing reached the CRM
        raise RetryableError("CRM_UNREACHABLE", str(exc)) from exc
    if resp.status == 429:
        effect.release()
        raise RateLimited(float(resp.headers.get("Retry-After", "1")), "CRM rate limit")
    if resp.status >= 500:
        effect.release()  # 503: the CRM says it did nothing
        raise RetryableError("CRM_UNAVAILABLE", f"CRM answered {resp.status}")
    if resp.status != 201:
        effect.release()
        raise PermanentError("CRM_REJECTED", f"{resp.status}: {resp.body.get('error')}")
    effect.complete({"contact_id": resp.body["id"]})


def _order_exists(tx, order_id: int) -> bool:
    return tx.execute("SELECT 1 FROM shop_orders WHERE id = %s", [order_id]).fetchone() is not None
