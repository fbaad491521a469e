"""Rates: "100/s", "6000/m", "50/h" (or a number: per second) as jobs per second."""

from __future__ import annotations

import math
import re

_RATE = re.compile(r"\A\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*\Z")
_PER = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
        "h": 3600.0, "hour": 3600.0}

#: Highest rate one scope may have: the claim spends tokens in whole jobs, and a limit
#: above this is no limit a downstream would name.
MAX_RATE = 100_000.0


def parse_rate(value: str | float | int) -> float:
    """Jobs per second; ValueError saying what is wrong. A bare number is per second."""
    if isinstance(value, bool):
        raise ValueError(f"a rate must be like '100/s' or '600/m', not {value!r}")
    if isinstance(value, int | float):
        per_second = float(value)
    elif isinstance(value, str):
        found = _RATE.match(value.lower())
        if found is None:
            raise ValueError(f"a rate must be like '100/s', '600/m' or '50/h', not {value!r}")
        per_second = float(found.group(1)) / _PER[found.group(2)]
    else:
        raise ValueError(f"a rate must be like '100/s' or '600/m', not {value!r}")
    if not math.isfinite(per_second) or not 0 < per_second <= MAX_RATE:
        raise ValueError(f"a rate must be above 0 and at most {MAX_RATE:g}/s, not {value!r}")
    return per_second


def default_burst(rate: float) -> float:
    """A bucket's capacity unless set: one second's worth, and at least one job."""
    return max(1.0, rate)


def describe_rate(per_second: float) -> str:
    """How a rate reads on a page or a terminal: per second, or per minute/hour if slow."""
    if per_second >= 1:
        return f"{per_second:g}/s"
    if per_second * 60 >= 1:
        return f"{per_second * 60:g}/m"
    return f"{per_second * 3600:g}/h"
