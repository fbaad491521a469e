"""Rate limits and concurrency caps, declared and live: what a lane's limited claim asks for.

A type declares `@job(..., rate_limit="100/s", rate_burst=N, rate_limit_key="a.b")`;
an operator may set a live limit on a queue or a type (maximum concurrency, rate, burst)
in `job_limit_controls` (worker/ops/operations.py). A live limit wins over the
declaration while it is set; cleared, the declaration holds again. Every worker re-reads
the controls on its duty thread (`LimitBook.refresh`, every `REFRESH_SECONDS`), so a
change reaches every worker within that interval and the next claim.

Enforcement is in PostgreSQL only (claim_jobs, docs/guide/rate-limits.md): a claim of
limited work takes the advisory locks of its scopes (limits_lock), then claims at most
as many jobs as the buckets hold tokens and the caps leave room, and spends the tokens
in the same statement. A worker that dies after that commit holds jobs, not tokens: its
jobs come back through their leases like any other, and the tokens were spent on them.
A claim that rolls back spent nothing. Work with no limit never takes this path: its
claim is the one statement it always was.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from jobwarden.worker.core.rates import default_burst
from jobwarden.worker.jobs.registry import JobType
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

#: How often a worker re-reads the live limits (seconds): the most a change waits.
REFRESH_SECONDS = 2.0
#: The longest a limited claim's transaction may sit idle holding its scopes' locks (a
#: worker frozen between its statements) before the server ends its session, and so the
#: longest such a worker stops the limit for every other one (docs/guide/rate-limits.md).
LOCK_IDLE_SECONDS = 1.0
#: The longest a limited claim waits for its scopes' locks before giving up for this
#: round: its lane's unlimited work is claimed meanwhile, and it tries again after a
#: refill's wait.
LOCK_WAIT_SECONDS = 0.5


@dataclass(frozen=True)
class Control:
    """One live limit an operator set (a row of job_limit_controls)."""

    scope: str  # "queue" or "type"
    name: str
    max_concurrency: int | None
    rate: float | None
    burst: float | None


@dataclass(frozen=True)
class LimitedClaim:
    """The limit keywords of one lane's limited claim (claim_jobs), and what it locks."""

    scopes: list[str]
    params: dict[str, Any]
    #: The lane's types and queues whose jobs only the limited claim takes.
    types: list[str]
    queues: list[str]
    #: The slowest rate among them (jobs per second): how soon tokens come back.
    slowest_rate: float | None


@dataclass
class LimitBook:
    """The declared limits of a worker's types, overlaid with the live controls."""

    types: list[JobType]
    controls: dict[tuple[str, str], Control] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        #: Whether any type declares a rate limit: without one, and with no live control,
        #: no lane has limited work, and for_lane says so without building anything (it
        #: runs before every claim, an idle worker's too).
        self._declared = any(t.rate_limit is not None for t in self.types)

    def refresh(self, conn: psycopg.Connection) -> None:
        """Re-read the live limits (the duty thread), and let full buckets go."""
        store = JobStore(conn)
        rows = store.dicts(Q.limit_controls_list)
        store.rows(Q.limits_prune_buckets)
        controls = {(r["scope"], r["name"]): Control(
            r["scope"], r["name"], r["max_concurrency"], r["rate"], r["burst"]) for r in rows}
        with self._lock:
            self.controls = controls

    def set_controls(self, controls: Iterable[Control]) -> None:
        with self._lock:
            self.controls = {(c.scope, c.name): c for c in controls}

    def for_lane(self, serves: Any) -> LimitedClaim | None:
        """The limited claim of a lane (`serves(queue)` says whether it serves a queue),
        or None when nothing it claims is limited: its one claim stays as it was."""
        if not self._declared and not self.controls:
            return None
        with self._lock:
            controls = dict(self.controls)
        rate_types: list[str] = []
        rates: list[float] = []
        bursts: list[float] = []
        paths: list[str | None] = []
        cap_types: list[str] = []
        caps: list[int] = []
        for t in self.types:
            live = controls.get(("type", t.name))
            rate = live.rate if live is not None and live.rate is not None else t.rate_limit
            if rate is not None:
                declared = (t.rate_burst if t.rate_limit == rate else None)
                burst = (live.burst if live is not None and live.rate is not None
                         and live.burst is not None else declared or default_burst(rate))
                rate_types.append(t.name)
                rates.append(rate)
                bursts.append(burst)
                paths.append(t.rate_limit_key)
            if live is not None and live.max_concurrency is not None:
                cap_types.append(t.name)
                caps.append(live.max_concurrency)
        rate_queues: list[str] = []
        queue_rates: list[float] = []
        queue_bursts: list[float] = []
        cap_queues: list[str] = []
        queue_caps: list[int] = []
        for (scope, name), c in sorted(controls.items()):
            if scope != "queue" or not serves(name):
                continue
            if c.rate is not None:
                rate_queues.append(name)
                queue_rates.append(c.rate)
                queue_bursts.append(c.burst or default_burst(c.rate))
            if c.max_concurrency is not None:
                cap_queues.append(name)
                queue_caps.append(c.max_concurrency)
        types = sorted(set(rate_types) | set(cap_types))
        queues = sorted(set(rate_queues) | set(cap_queues))
        if not types and not queues:
            return None
        every_rate = rates + queue_rates
        return LimitedClaim(
            scopes=[f"type:{n}" for n in types] + [f"queue:{n}" for n in queues],
            params={"rate_types": rate_types or None, "type_rates": rates or None,
                    "type_bursts": bursts or None, "type_key_paths": paths or None,
                    "rate_queues": rate_queues or None, "queue_rates": queue_rates or None,
                    "queue_bursts": queue_bursts or None,
                    "cap_types": cap_types or None, "type_caps": caps or None,
                    "cap_queues": cap_queues or None, "queue_caps": queue_caps or None},
            types=types, queues=queues,
            slowest_rate=min(every_rate) if every_rate else None)


def lock_scopes(conn: psycopg.Connection, scopes: list[str]) -> None:
    """Take the scopes' advisory locks in the caller's transaction (limits_lock), bounding
    the wait for them and the transaction's idle time (LOCK_WAIT_SECONDS,
    LOCK_IDLE_SECONDS). Raises psycopg.errors.LockNotAvailable when the wait runs out."""
    JobStore(conn).rows(Q.limits_lock, {
        "scopes": scopes, "lock_wait": f"{round(LOCK_WAIT_SECONDS * 1000)}ms",
        "idle": f"{round(LOCK_IDLE_SECONDS * 1000)}ms"})


def limited_waiting(conn: psycopg.Connection, limited: LimitedClaim) -> bool:
    """Whether a due job of the limited types or queues is pending."""
    row = JobStore(conn).one(Q.limits_waiting, {"types": limited.types,
                                                "queues": limited.queues})
    return bool(row[0])


def refill_wait(limited: LimitedClaim, poll_interval: float) -> float:
    """How long a producer whose limited work waits sleeps before claiming again: about
    one token of the slowest bucket, at least 50 ms (a claim every few tokens, not one
    per token), at most its poll interval."""
    if limited.slowest_rate is None:  # caps only: a finished job wakes the producer
        return poll_interval
    return min(poll_interval, max(0.05, 1.0 / limited.slowest_rate))
