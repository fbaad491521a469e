"""Durations, in one notation wherever Jobwarden takes one: `@job(timeout=..., sla=...)`,
the command line (`--delay 5m`) and the JOBWARDEN_* settings (`JOBWARDEN_STALE_AFTER=30s`).

A duration is a number of seconds (`30`, `2.5`) or a number with a unit: `250ms`, `30s`,
`5m`, `2h`, `7d`. A `DurationRule` says which of them a place takes (zero or not, a bare
number or not, how long at most) and refuses anything else with one line saying why:
never a silent default.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema

#: The longest duration anything takes: ten years. Longer is a unit mistake (ms for s).
LONGEST = 10 * 366 * 24 * 3600
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
EXAMPLES = "30, 30s, 5m, 2h or 7d"

_FORM = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*(ms|s|m|h|d)?\s*$")


def shown(value: object) -> str:
    """A value as given, escaped and cut short, for a one-line error message."""
    text = value if isinstance(value, str) else str(value)
    escaped = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return repr(escaped if len(escaped) <= 40 else escaped[:37] + "...")


def written(seconds: float) -> str:
    """Seconds in the notation's largest whole unit: 86400 -> "1d", 90 -> "90s"."""
    for unit in ("d", "h", "m", "s"):
        if seconds and seconds % UNITS[unit] == 0:
            return f"{seconds / UNITS[unit]:g}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class DurationRule:
    """Which durations one place takes. `parse` returns seconds or raises ValueError.

    Used as a pydantic type too: `Annotated[float, DurationRule(positive=True)]`.
    """

    #: Zero refused (an interval of 0 would spin; an age of 0 deletes everything).
    positive: bool = False
    #: A bare number refused: where a mistake deletes data, `3` must not quietly mean
    #: 3 seconds to someone who meant 3 days.
    unit: bool = False
    maximum: float = LONGEST

    def parse(self, value: object) -> float:
        if isinstance(value, str):
            match = _FORM.match(value)
            if not match:
                raise ValueError(f"{shown(value)} is not a duration: use e.g. {EXAMPLES}")
            if self.unit and match.group(2) is None:
                raise ValueError(f"{shown(value)} needs a unit: e.g. 7d, 12h, 30m or 90s")
            seconds = float(match.group(1)) * UNITS[match.group(2) or "s"]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            if self.unit:
                raise ValueError(f"{shown(value)} needs a unit: e.g. 7d, 12h, 30m or 90s")
            try:
                seconds = float(value)
            except OverflowError:  # an int past a float's range
                seconds = math.inf
            if math.isnan(seconds):
                raise ValueError(f"{shown(value)} is not a duration: use e.g. {EXAMPLES}")
        else:
            raise ValueError(f"{shown(value)} is not a duration: use e.g. {EXAMPLES}")
        if seconds < 0:
            raise ValueError(f"{shown(value)} is negative: a duration is 0 or more")
        if seconds == 0 and self.positive:
            raise ValueError(f"{shown(value)} must be more than 0")
        if seconds > self.maximum:  # inf included: "9" * 400 reads as inf
            raise ValueError(f"{shown(value)} is longer than {written(self.maximum)}")
        return seconds

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> CoreSchema:
        # Only a settings model asks (pydantic loaded): worker/core/env.py says why the
        # runtime may not load it.
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(self.parse)


#: Any duration from 0 to LONGEST.
ANY = DurationRule()
#: More than zero: an interval, a threshold, a target.
POSITIVE = DurationRule(positive=True)

Duration = Annotated[float, ANY]
PositiveDuration = Annotated[float, POSITIVE]


def parse_duration(value: float | int | str | None) -> float | None:
    """Seconds from 30, 2.5, "30s", "5m", "1h", "7d", "250ms"; None stays None."""
    return None if value is None else ANY.parse(value)
