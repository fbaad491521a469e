"""Sign-in throttling by account and by client address (counts kept in PostgreSQL).

Each failed sign-in counts against two subjects: `account:<name>` and `address:<ip>`.
After a subject's free failures, every further failure locks it for a delay that doubles
(1 s, 2 s, 4 s…) up to a cap. While a subject is locked, sign-ins are answered 429 with
Retry-After and no password is checked, so a locked subject gives an attacker nothing.
Each attempt is counted before its password is checked (`admit`), so attempts sent in
parallel cannot all slip through before the first of them is counted; and the lock the
last free attempt sets holds until its password's answer is known (`record_failure`
then starts the delay), so checks slower than the delay let no further attempt in.

The account cap is short (a minute by default): an attacker hammering someone's name
can slow them down but never lock them out for long. The address cap is long (15
minutes): one address spraying many names is the attacker. A successful sign-in forgets
the account's failures and is taken back from the address's; counts restart after a
quiet window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from jobwarden.console.core.config import LOGIN_THROTTLE_DEFAULTS, settings
from jobwarden.console.data.database import CQ, get_db

ACCOUNT, ADDRESS = "account", "address"
#: Defaults for the console settings of the same names (console/core/config.py).
DEFAULTS = LOGIN_THROTTLE_DEFAULTS


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
    locks = get_db().all(CQ.console_login_locks, subjects=subjects.both())
    if not locks:
        return 0
    left: float = max(row["seconds_left"] for row in locks)
    return max(1, math.ceil(left))


@dataclass(frozen=True)
class Attempt:
    """An attempt counted against both subjects, before its password is checked."""

    subjects: Subjects
    #: Whether counting it locked the address (lifted again if the password is right).
    locked_address: bool
    #: Per subject it locked: the lock it set, and the subject's free attempts and cap
    #: (the lock holds until the answer is known, then runs its delay: `record_failure`).
    locks: tuple[tuple[str, datetime, int, float], ...] = ()


class Locked(Exception):
    """A subject is locked: the attempt was refused, nothing was counted or checked."""

    def __init__(self, seconds: int):
        super().__init__(f"locked for {seconds} s")
        self.seconds = seconds


def admit(subjects: Subjects) -> Attempt:
    """Count a sign-in attempt against both subjects, or raise Locked if either is locked.

    Counted first, checked after: parallel attempts wait for each other's count (a row
    lock), so at most the free attempts of a subject ever reach the password check. A
    refused attempt counts against neither subject (its transaction is rolled back).
    """
    cfg = settings()
    window = cfg["LOGIN_FAILURE_WINDOW_SECONDS"]
    locks = []
    try:
        with get_db().transaction() as tx:
            locked = {}
            # Always the account's row, then the address's: the same order in every
            # transaction, so two attempts never wait for each other in a cycle.
            for subject, free, cap in (
                    (subjects.account, cfg["LOGIN_ACCOUNT_FREE_FAILURES"],
                     cfg["LOGIN_ACCOUNT_LOCK_MAX_SECONDS"]),
                    (subjects.address, cfg["LOGIN_ADDRESS_FREE_FAILURES"],
                     cfg["LOGIN_ADDRESS_LOCK_MAX_SECONDS"])):
                row = tx.one(CQ.console_login_attempt, subject=subject, free=free,
                             cap=cap, window=window)
                if row is None:  # locked: roll back what this attempt counted so far
                    raise Locked(0)
                locked[subject] = row["locked"]
                if row["locked"]:
                    locks.append((subject, row["locked_until"], free, cap))
            tx.run(CQ.console_login_prune, older_than=window)
    except Locked:
        raise Locked(max(1, seconds_locked(subjects))) from None
    return Attempt(subjects, locked_address=locked[subjects.address], locks=tuple(locks))


def record_failure(attempt: Attempt) -> None:
    """The password was wrong (or its check never ended): each lock the attempt set runs
    its delay from now, the moment the answer goes back."""
    if not attempt.locks:
        return
    with get_db().transaction() as tx:
        for subject, locked_until, free, cap in attempt.locks:
            tx.run(CQ.console_login_lock_from_now, subject=subject, locked_until=locked_until,
                   free=free, cap=cap)


def record_success(attempt: Attempt) -> None:
    """Forget the account's failures (its owner is back), and take the attempt back from
    the address: a right password is no failure of the address's."""
    with get_db().transaction() as tx:
        tx.run(CQ.console_login_forget, subject=attempt.subjects.account)
        tx.run(CQ.console_login_refund, subject=attempt.subjects.address,
               unlock=attempt.locked_address)
