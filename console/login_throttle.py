"""Sign-in throttling by account and by client address (counts kept in PostgreSQL).

Each failed sign-in counts against two subjects: `account:<name>` and `address:<ip>`.
After a subject's free failures, every further failure locks it for a delay that doubles
(1 s, 2 s, 4 s…) up to a cap. While a subject is locked, sign-ins are answered 429 with
Retry-After and no password is checked, so a locked subject gives an attacker nothing.

The account cap is short (a minute by default): an attacker hammering someone's name
can slow them down but never lock them out for long. The address cap is long (15
minutes): one address spraying many names is the attacker. A successful sign-in forgets
the account's failures; counts restart after a quiet window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from console.database import Q, get_db
from console.mount import settings

ACCOUNT, ADDRESS = "account", "address"
#: Defaults for the console settings of the same names (console/config.py).
DEFAULTS = {
    "LOGIN_ACCOUNT_FREE_FAILURES": 5,
    "LOGIN_ACCOUNT_LOCK_MAX_SECONDS": 60,
    "LOGIN_ADDRESS_FREE_FAILURES": 20,
    "LOGIN_ADDRESS_LOCK_MAX_SECONDS": 900,
    "LOGIN_FAILURE_WINDOW_SECONDS": 900,
}


@dataclass(frozen=True)
class Subjects:
    """Who a sign-in attempt counts against."""

    account: str
    address: str

    @classmethod
    def of(cls, username: str, address: str | None) -> Subjects:
        return cls(f"{ACCOUNT}:{username}", f"{ADDRESS}:{address or 'unknown'}")

    def both(self) -> list[str]:
        return [self.account, self.address]


def seconds_locked(subjects: Subjects) -> int:
    """Seconds until either subject may try again (0 when neither is locked)."""
    locks = get_db().all("console_login_locks", subjects=subjects.both())
    if not locks:
        return 0
    return max(1, math.ceil(max(row["seconds_left"] for row in locks)))


def record_failure(subjects: Subjects) -> None:
    """Count a failed sign-in against both subjects, locking those past their free tries."""
    cfg = settings()
    window = cfg["LOGIN_FAILURE_WINDOW_SECONDS"]
    with get_db().transaction() as conn:
        for subject, free, cap in (
                (subjects.account, cfg["LOGIN_ACCOUNT_FREE_FAILURES"],
                 cfg["LOGIN_ACCOUNT_LOCK_MAX_SECONDS"]),
                (subjects.address, cfg["LOGIN_ADDRESS_FREE_FAILURES"],
                 cfg["LOGIN_ADDRESS_LOCK_MAX_SECONDS"])):
            failures = conn.exec_driver_sql(Q.console_login_failed, {
                "subject": subject, "window": window}).scalar_one()
            if failures >= free:
                conn.exec_driver_sql(Q.console_login_lock, {
                    "subject": subject, "seconds": lock_seconds(failures - free, cap)})
        conn.exec_driver_sql(Q.console_login_prune, {"older_than": window})


def record_success(subjects: Subjects) -> None:
    """Forget the account's failures: its owner is back."""
    with get_db().transaction() as conn:
        conn.exec_driver_sql(Q.console_login_forget, {"subject": subjects.account})


def lock_seconds(excess: int, cap: float) -> float:
    """1 s for the first failure past the free ones, doubling each time, at most `cap`."""
    return float(min(cap, 2 ** min(excess, 30)))
