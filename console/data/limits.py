"""Rate limits and live limits as the Queues page and a job type's page show them.

A scope's effective limit is what the workers apply (worker/engine/limits.py): the live
limit an operator set, else the type's declaration (a queue has none), and a burst of
one second's worth unless one was given. Figures come from the base tables
(console_limits): the current rate is the executions started in the last 10 seconds,
per second.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobwarden.console.data.database import CQ, Reader
from jobwarden.worker.core.rates import default_burst, describe_rate

#: The window the current rate is counted over (console_limits), in seconds.
RATE_WINDOW = 10


@dataclass(frozen=True)
class LimitRow:
    scope: str
    name: str
    declared_rate: float | None
    declared_burst: float | None
    key_path: str | None
    live_concurrency: int | None
    live_rate: float | None
    live_burst: float | None
    set_by: str | None
    set_at: datetime | None
    reason: str | None
    started: int  # executions started in the last RATE_WINDOW seconds
    running: int
    waiting: int

    @property
    def rate(self) -> float | None:
        return self.live_rate if self.live_rate is not None else self.declared_rate

    @property
    def burst(self) -> float | None:
        rate = self.rate
        if rate is None:
            return None
        if self.live_rate is not None:
            return self.live_burst or default_burst(rate)
        return self.declared_burst or default_burst(rate)

    @property
    def rate_label(self) -> str:
        """The effective rate as it reads: "100/s (burst 100)", "600/m per account.id"."""
        rate = self.rate
        if rate is None:
            return "none"
        per_key = f" per {self.key_path}" if self.key_path else ""
        return f"{describe_rate(rate)}{per_key} (burst {self.burst:g})"

    @property
    def declared_label(self) -> str:
        if self.declared_rate is None:
            return "none"
        burst = self.declared_burst or default_burst(self.declared_rate)
        return f"{describe_rate(self.declared_rate)} (burst {burst:g})"

    @property
    def current_rate(self) -> float:
        """Jobs claimed per second over the last RATE_WINDOW seconds."""
        return self.started / RATE_WINDOW

    @property
    def live(self) -> bool:
        return self.set_at is not None


def limits(reader: Reader, scope: str | None = None, name: str | None = None
           ) -> list[LimitRow]:
    """Every limited scope, or the one named."""
    return [_row(r) for r in reader.all(CQ.console_limits, scope=scope, name=name)]


def _row(r: dict[str, Any]) -> LimitRow:
    return LimitRow(
        scope=r["scope"], name=r["name"], declared_rate=r["declared_rate"],
        declared_burst=r["declared_burst"], key_path=r["rate_limit_key"],
        live_concurrency=r["max_concurrency"], live_rate=r["live_rate"],
        live_burst=r["live_burst"], set_by=r["set_by"], set_at=r["set_at"],
        reason=r["reason"], started=r["started_10s"], running=r["running"],
        waiting=r["waiting"])


#: Most fair keys a type's page lists (those whose oldest due job has waited longest).
FAIR_KEYS_SHOWN = 50


@dataclass(frozen=True)
class FairKeyRow:
    """One fair key of a type with pending jobs, as its page shows it."""

    key: str
    backlog: int
    due: int
    oldest_wait_s: float | None
    #: Its oldest due job has waited longer than the type's SLA target.
    starved: bool


def fair_keys(reader: Reader, job_type: str,
              sla_s: float | None) -> tuple[list[FairKeyRow], int]:
    """The type's fair keys with pending jobs (at most FAIR_KEYS_SHOWN, longest waiting
    first) and how many there are in all."""
    rows = reader.all(CQ.console_fair_keys, type=job_type, limit=FAIR_KEYS_SHOWN)
    return [FairKeyRow(key=r["fair_key"], backlog=r["backlog"], due=r["due"],
                       oldest_wait_s=r["oldest_wait_s"],
                       starved=(sla_s is not None and r["oldest_wait_s"] is not None
                                and r["oldest_wait_s"] > sla_s))
            for r in rows], (rows[0]["keys"] if rows else 0)


def job_type_policy(reader: Reader, job_type: str) -> dict[str, Any] | None:
    """A type's published policy, or None when no worker published it."""
    return reader.one(CQ.console_job_type_policy, type=job_type)
