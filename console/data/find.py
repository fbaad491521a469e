"""Finding an old job by when it was created: the ids are the clock.

background_jobs has no index on created_at (every row version of every job would write
one: a job's status changes are not HOT updates). It needs none: ids are handed out in
the order jobs are inserted, and a job's created_at is its enqueuing transaction's start,
so created_at grows with the id, except for the time such a transaction stays open
before its insert. `ids_at` finds where a moment falls among the ids by halving the id
range with probes of the primary key (console_ids_at): about 50 probes at 10,000,000 jobs,
whatever the number of newer jobs. Then:

- a time range [start, end) is the ids from where start - SLACK splits them to where
  end + SLACK does, with created_at tested exactly inside them: every job created in the
  range is found unless an enqueuing transaction stayed open over SLACK before its
  insert (then a job near an end of the range may be missed: docs/guide/console.md says
  so); the jobs list and the search page keyset by id as always, so each page is one
  walk of an index;
- a jump to a date starts the list where the date splits the ids (no margin: a
  position, not a filter; the rows show their times).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobwarden.console.data.database import CQ, Reader

#: How long an enqueuing transaction may stay open before its insert with its job still
#: found by a time range (its created_at is earlier than its id's neighbours' by that).
SLACK = timedelta(minutes=5)
#: The longest time text read (a longer one is refused, never cut and half-read).
TIME_TEXT_MAX = 40
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


class BadTime(ValueError):
    """A time the console cannot take: its message says why, in one line."""


def moment(text: str | None, what: str) -> datetime | None:
    """A time typed as YYYY-MM-DD[THH:MM[:SS]] in UTC (the zone the console shows), or with
    an offset; None when empty. BadTime names `what` and the text, cut short."""
    text = (text or "").strip()
    if not text:
        return None
    shown = text[:TIME_TEXT_MAX]
    if len(text) > TIME_TEXT_MAX:
        shown += "…"
    try:
        parsed = datetime.fromisoformat(text) if len(text) <= TIME_TEXT_MAX else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise BadTime(f"Give {what} as YYYY-MM-DD HH:MM (UTC) or with an offset, not "
                      f"{shown!r}.")
    try:
        # In UTC now: an offset can carry a moment past year 9999 or before year 1.
        return (parsed if parsed.utcoffset() is not None
                else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:
        raise BadTime(f"Give {what} from 0001-01-01 to 9999-12-31 23:59:59 UTC, not "
                      f"{shown!r}.") from None


@dataclass(frozen=True)
class Created:
    """Jobs created at `start` or later and before `end` (either may be open)."""

    start: datetime | None = None
    end: datetime | None = None

    def __post_init__(self) -> None:
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise BadTime("A time range's start must come before its end.")

    @property
    def given(self) -> bool:
        return self.start is not None or self.end is not None

    def describe(self) -> str:
        parts = [f"{label} {at:%Y-%m-%d %H:%M:%S} UTC"
                 for label, at in (("from", self.start), ("before", self.end)) if at]
        return "created " + " and ".join(parts) if parts else ""


def ids_at(reader: Reader, moments: list[datetime]) -> list[int]:
    """For each moment, the id where it splits the jobs (those below it were created
    before it; one past the newest job when none is that recent): one statement."""
    if not moments:
        return []
    return [r["id"] for r in reader.all(CQ.console_ids_at, moments=moments)]


def id_bounds(reader: Reader, created: Created) -> tuple[int | None, int | None]:
    """(floor, top): the jobs created in `created` have ids floor <= id < top (None: no
    bound on that side), give or take an enqueuing transaction open over SLACK."""
    wanted = [_shifted(created.start, -SLACK) if created.start else None,
              _shifted(created.end, SLACK) if created.end else None]
    found = iter(ids_at(reader, [m for m in wanted if m is not None]))
    floor, top = (next(found) if m is not None else None for m in wanted)
    return floor, top


def _shifted(at: datetime, by: timedelta) -> datetime:
    try:
        return at + by
    except OverflowError:  # past year 9999 or before year 1: every job is inside
        return _LATEST if by > timedelta(0) else _EARLIEST
