"""The webhook signature: HMAC-SHA256 over the timestamp and the body, so a receiver can
tell a message from Jobwarden from one anybody could post to its URL, and a recorded
message replayed later from a fresh one (docs/guide/notifications.md, "Verifying").

    X-Jobwarden-Timestamp: 1767225600
    X-Jobwarden-Signature: v1=<hex of HMAC-SHA256(secret, b"1767225600." + body)>

The signed bytes are the timestamp as sent, a dot, and the body exactly as sent (not
parsed and serialized again). `v1=` names the scheme, so a later one can be sent beside
it while receivers move over.
"""

from __future__ import annotations

import hashlib
import hmac
import time

TIMESTAMP_HEADER = "X-Jobwarden-Timestamp"
SIGNATURE_HEADER = "X-Jobwarden-Signature"
#: A receiver refuses a message whose timestamp is further than this from its clock.
TOLERANCE_SECONDS = 300
SCHEME = "v1"


def signature(secret: str, timestamp: int | str, body: bytes) -> str:
    """`v1=<hex>` for `body` sent at `timestamp` (Unix seconds, as the header says it)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"{SCHEME}={mac.hexdigest()}"


def signed_headers(secret: str, body: bytes, now: float | None = None) -> dict[str, str]:
    """The two headers of a signed message."""
    timestamp = int(time.time() if now is None else now)
    return {TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: signature(secret, timestamp, body)}


def verify(secret: str, timestamp: str, sent: str, body: bytes, now: float | None = None,
           tolerance: float = TOLERANCE_SECONDS) -> bool:
    """Whether `sent` (the signature header) signs `body` at `timestamp` (its header)
    with `secret`, within `tolerance` seconds of now. What a receiver runs; the guide
    prints the same steps with the standard library alone."""
    try:
        when = int(timestamp)
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - when) > tolerance:
        return False
    expected = signature(secret, timestamp, body)
    return any(hmac.compare_digest(expected, part.strip()) for part in sent.split(","))
