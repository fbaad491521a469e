"""Retry timing: exponential backoff with a cap and jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass

from jobwarden.worker.core.durations import parse_duration


@dataclass(frozen=True)
class RetryPolicy:
    """delay = min(cap, base × 2^(attempt-1)), then spread by ±jitter (a fraction).

    Jitter keeps thousands of jobs that failed in the same second from coming back in
    the same second and hitting a recovering dependency all at once.
    """

    base: float = 5.0
    cap: float = 3600.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.base < 0 or self.cap < 0 or not 0 <= self.jitter <= 1:
            raise ValueError("backoff needs base >= 0, cap >= 0 and 0 <= jitter <= 1")

    def delay_for(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before the attempt after `attempt` (1-based)."""
        exponent = max(attempt, 1) - 1
        # Cap the exponent first: 2**5000 would overflow a float.
        raw = self.cap if exponent > 60 else min(self.cap, self.base * 2**exponent)
        if self.jitter == 0 or raw == 0:
            return raw
        spread = raw * self.jitter
        return max(0.0, (rng or random).uniform(raw - spread, raw + spread))

    @classmethod
    def coerce(cls, value: RetryPolicy | float | int | str | None) -> RetryPolicy:
        if value is None:
            return cls()
        if isinstance(value, RetryPolicy):
            return value
        return cls(base=parse_duration(value) or 0.0)


#: Backoff for jobs whose type this worker does not know (recovery of foreign types).
DEFAULT_POLICY = RetryPolicy()
