"""How long finished jobs and their history are kept: JOBWARDEN_RETENTION's policy.

Read here, at the bottom of the runtime, so that the settings (worker/core/settings.py)
refuse a bad JOBWARDEN_RETENTION at start-up; worker/duties/retention.py applies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobwarden.worker.core.durations import POSITIVE, written

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
        given: dict[str, str] = {}  # each part as written, for the messages
        for item in text.split(","):
            status, _, value = item.partition("=")
            status = status.strip()
            if status in given:  # which of the two was meant is not ours to guess
                raise ValueError(f"retention: {status} is given twice "
                                 f"({status}={given[status]} and {item.strip()})")
            if status not in (*DEFAULT_AGES, "executions"):
                raise ValueError(f"retention: unknown status {status!r} "
                                 f"(use {', '.join(DEFAULT_AGES)} or executions)")
            try:
                seconds = POSITIVE.parse(value.strip())
            except ValueError:
                raise ValueError(f"retention: {item.strip()!r} needs a positive age like "
                                 "14d") from None
            given[status] = value.strip()
            if status == "executions":
                history = seconds
            else:
                ages[status] = seconds
        longest = max(ages, key=lambda status: ages[status])
        if history is not None and history < ages[longest]:
            # A week of history goes once it is older than `executions`, and with it the
            # attempts of jobs still kept (an operator retries a failed job weeks later
            # and finds its first attempt gone).
            age = given.get(longest) or f"{ages[longest] / DAY:g}d"
            raise ValueError(f"retention: executions={given['executions']} is shorter "
                             f"than {longest}={age}: the history of jobs still kept "
                             f"would go; give executions at least {age}, or leave it out")
        return cls(ages=ages, history=history)

    @property
    def batch_age(self) -> float:
        """Seconds an ended batch is kept once none of its members is left: the shortest
        of the jobs' ages (its members' own ages keep it longer)."""
        return min(self.ages.values())

    @property
    def history_age(self) -> float:
        """Seconds a finished execution's history row is kept."""
        return self.history if self.history is not None else max(self.ages.values())

    def __str__(self) -> str:
        """The policy in JOBWARDEN_RETENTION's notation."""
        parts = [f"{status}={written(age)}" for status, age in self.ages.items()]
        if self.history is not None:
            parts.append(f"executions={written(self.history)}")
        return ",".join(parts)
