"""Two fake third parties the shop's jobs call over HTTP, served by the shop itself.

- A payment provider that honours `Idempotency-Key`, as Stripe and Adyen do: the same key
  answers the first charge again instead of charging twice.
- A CRM that has no idempotency at all and answers 503 or 429 now and then
  (`SHOP_CRM_FLAKINESS`, a fraction; 0 turns it off). The admin page can break it
  outright (every call 503) and fix it again.

`call()` is the jobs' HTTP client (the standard library's urllib, to keep the example small).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import urllib.error
import urllib.request

from flask import Blueprint, current_app, jsonify, request
from sqlalchemy.dialects.postgresql import insert

from shop.models import FakeCharge, FakeCrmContact, FakeCrmSwitch, db

bp = Blueprint("providers", __name__)


@bp.post("/payments")
def charge():
    key = request.headers.get("Idempotency-Key", "")
    body = request.get_json(silent=True) or {}
    amount = body.get("amount_cents")
    if not key or not isinstance(amount, int) or amount <= 0:
        return jsonify(error="Idempotency-Key and a positive amount_cents are required"), 400
    inserted = db.session.execute(
        insert(FakeCharge)
        .values(idempotency_key=key, charge_id="ch_" + secrets.token_hex(8), amount_cents=amount)
        .on_conflict_do_nothing(index_elements=["idempotency_key"])
        .returning(FakeCharge.charge_id)).scalar()
    db.session.commit()
    existing = db.session.get(FakeCharge, key)
    if existing.amount_cents != amount:  # the key was used for a different charge
        return jsonify(error="Idempotency-Key reused with another amount"), 422
    return jsonify(id=existing.charge_id, replayed=inserted is None)


@bp.post("/crm/contacts")
def add_contact():
    body = request.get_json(silent=True) or {}
    switch = db.session.get(FakeCrmSwitch, 1)
    if switch is not None and switch.broken:
        return jsonify(error="CRM is down for maintenance"), 503
    flakiness = float(current_app.config.get("SHOP_CRM_FLAKINESS", 0))
    roll = random.random()
    if roll < flakiness / 2:
        return jsonify(error="try later"), 503
    if roll < flakiness:
        return jsonify(error="slow down"), 429, {"Retry-After": "1"}
    contact = FakeCrmContact(email=str(body.get("email", "")),
                             order_id=int(body.get("order_id", 0)))
    db.session.add(contact)
    db.session.commit()
    return jsonify(id=contact.id), 201


def set_crm_broken(broken: bool) -> None:
    """The admin page's switch (in the caller's session; the caller commits)."""
    db.session.merge(FakeCrmSwitch(id=1, broken=broken))


def crm_broken() -> bool:
    switch = db.session.get(FakeCrmSwitch, 1)
    return bool(switch and switch.broken)


class Response:
    def __init__(self, status: int, body: dict, headers: dict[str, str]):
        self.status, self.body, self.headers = status, body, headers


def call(path: str, body: dict, idempotency_key: str | None = None,
         timeout: float = 5.0) -> Response:
    """POST JSON to a fake provider at SHOP_PROVIDERS_URL. Network errors propagate
    (TimeoutError, urllib.error.URLError): the caller decides what they mean."""
    base = os.environ.get("SHOP_PROVIDERS_URL", "http://127.0.0.1:5000/fake")
    headers = {"Content-Type": "application/json"}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    req = urllib.request.Request(base.rstrip("/") + path, data=json.dumps(body).encode(),
                                 headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return Response(resp.status, json.load(resp), dict(resp.headers))
    except urllib.error.HTTPError as err:  # 4xx and 5xx still carry a body and headers
        try:
            payload = json.load(err)
        except ValueError:
            payload = {}
        return Response(err.code, payload, dict(err.headers))
