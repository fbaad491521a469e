"""Retention as a duty: workers delete old finished jobs in small batches.

Completed jobs go after 14 days, skipped and cancelled after 30, failed after 90 (the
dead letters stay longest); `JOBWARDEN_RETENTION` changes them (`completed=7d,failed=180d`,
or `off`). Each batch is one short transaction that first takes a transaction-level
advisory lock, so one worker at a time prunes and no lock outlives its batch; a batch
deletes at most `batch` jobs with their executions (in the same statement) and their `done`
effect-ledger entries. Audit rows stay, their job_id set NULL. A job's age runs from the
moment it reached its current status (migration 0017). `jobwarden prune` is the one-off
command: the same batches (`prune`), run until nothing is left.

The execution history is not deleted row by row: its weekly partitions are dropped once
every row in them is older than the history's age (`executions=...`; by default the
longest of the jobs' ages) and no job still here has an execution in them: a job still
kept keeps all its attempts, however long ago the first was (migration 0071). So each
pass deletes the jobs first and drops weeks after. A deleted job's history stays until
its week goes (migration 0066).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

import psycopg

from jobwarden.worker.core.policy import parse_duration
from jobwarden.worker.duties import partitions
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.retention")

DAY = 86400.0
DEFAULT_AGES = {"completed": 14 * DAY, "skipped": 30 * DAY, "cancelled": 30 * DAY,
                "failed": 90 * DAY}


@dataclass(frozen=True)
class RetentionPolicy:
    """How old a finished job of each status gets before retention deletes it."""

    ages: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_AGES))
    history: float | None = None  # seconds the execution history is kept; None: max(ages)
    batch: int = 500  # jobs per transaction: short enough never to hold locks for long
    max_batches: int = 20  # per pass, so a huge backlog of old jobs is spread over passes

    @classmethod
    def parse(cls, text: str | None) -> RetentionPolicy | None:
        """`completed=14d,failed=90d` over the defaults; `off` (or `none`) disables.

        Raises ValueError naming the part it cannot read, or an `executions=` shorter
        than a job age (a job still kept keeps all its attempts).
        """
        if text is None or not text.strip():
            return cls()
        if text.strip().lower() in ("off", "none"):
            return None
        ages = dict(DEFAULT_AGES)
        history = None
        written: dict[str, str] = {}  # each part as given, for the messages
        for item in text.split(","):
            status, _, value = item.partition("=")
            status = status.strip()
            if status not in (*DEFAULT_AGES, "executions"):
                raise ValueError(f"retention: unknown status {status!r} "
                                 f"(use {', '.join(DEFAULT_AGES)} or executions)")
            try:
                seconds = parse_duration(value.strip())
            except ValueError:
                seconds = None
            if not seconds or seconds <= 0:
                raise ValueError(f"retention: {item.strip()!r} needs a positive age like 14d")
            written[status] = value.strip()
            if status == "executions":
                history = seconds
            else:
                ages[status] = seconds
        longest = max(ages, key=lambda status: ages[status])
        if history is not None and history < ages[longest]:
            # A week of history goes once it is older than `executions`, and with it the
            # attempts of jobs still kept (an operator retries a failed job weeks later
            # and finds its first attempt gone).
            age = written.get(longest) or f"{ages[longest] / DAY:g}d"
            raise ValueError(f"retention: executions={written['executions']} is shorter "
                             f"than {longest}={age}: the history of jobs still kept "
                             f"would go; give executions at least {age}, or leave it out")
        return cls(ages=ages, history=history)

    @property
    def history_age(self) -> float:
        """Seconds a finished execution's history row is kept."""
        return self.history if self.history is not None else max(self.ages.values())

    @classmethod
    def from_env(cls) -> RetentionPolicy | None:
        return cls.parse(os.environ.get("JOBWARDEN_RETENTION"))


def run_once(conn: psycopg.Connection, policy: RetentionPolicy,
             drop_history: bool = True) -> dict[str, int] | None:
    """One retention pass; returns jobs deleted per status, or None when another worker
    holds the retention lock. `conn`: a psycopg connection; commits after each batch.
    Then (`drop_history`) the history's partitions past `policy.history_age` go."""
    deleted = dict.fromkeys(policy.ages, 0)
    effects = 0
    for _ in range(policy.max_batches):
        progressed = False
        for status, age in policy.ages.items():
            with conn.transaction():
                store = JobStore(conn)
                if not store.one(Q.retention_try_lock)[0]:
                    return None
                jobs, gone_effects = store.one(Q.retention_delete_batch, {
                    "status": status, "older_than": age, "batch": policy.batch})
            deleted[status] += jobs
            effects += gone_effects
            progressed = progressed or jobs == policy.batch
        if not progressed:  # every status ran out of old jobs in this round
            break
    if any(deleted.values()):
        log.info("retention deleted %s (and %d done ledger entries)", deleted, effects,
                 extra={"action": "retention_pruned", "deleted": deleted, "effects": effects})
    if drop_history:  # after the jobs: a week goes only once no job left here holds it
        partitions.drop_expired(conn, policy.history_age)
    return deleted


def count_prunable(conn: psycopg.Connection, statuses: list[str],
                   older_than: float) -> dict[str, int]:
    """How many jobs of each of `statuses` `prune` would delete now (0 for none)."""
    counts = dict.fromkeys(statuses, 0)
    counts.update(dict(JobStore(conn).rows(Q.retention_count,
                                           {"statuses": statuses, "older_than": older_than})))
    return counts


def prune(conn: psycopg.Connection, statuses: list[str], older_than: float,
          wait: float = 0.5) -> dict[str, int]:
    """Delete every job of `statuses` that reached it more than `older_than` seconds ago,
    in retention's batches (so its done ledger entries go too, and no lock is held long);
    waits while a worker's retention pass holds the lock. Returns jobs deleted per status."""
    policy = RetentionPolicy(ages=dict.fromkeys(statuses, older_than), max_batches=1)
    deleted = dict.fromkeys(statuses, 0)
    while True:
        # The history's weeks follow the workers' own retention, not a one-off prune.
        batch = run_once(conn, policy, drop_history=False)
        if batch is None:
            time.sleep(wait)  # a worker's pass is under way; its batches are short
            continue
        for status, n in batch.items():
            deleted[status] += n
        if all(n < policy.batch for n in batch.values()):
            return deleted
