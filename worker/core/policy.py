"""Retry timing: exponential backoff with a cap and jitter, and duration parsing."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(value: float | int | str | None) -> float | None:
    """Seconds from 30, 2.5, "30s", "5m", "1h", "250ms"; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"not a duration: {value!r} (try 30, '30s', '5m', '1h')")
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds < 0:
        raise ValueError(f"duration must not be negative: {value!r}")
    return seconds


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
