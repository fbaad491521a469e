"""A job type's handler durations over time: p50 and p95 per bucket, with the moments a
new handler version or a worker started.

Read from the execution history (console/data/sql/durations.sql) through the index of
one type's executions by when they ended (migration 0078): the cost grows with that
type's executions in the range, not with the history, and only the range's weekly
partitions are read. The percentiles are exact (percentile_cont), not estimated from
histogram buckets. console/web/charts.py draws the result.

The marks: nothing in an execution's row says which version of its handler ran it. A
version is marked where the first worker that published it (job_type_versions, written
when a worker publishes a version no worker had published before) first ran the type,
or, when it ran none within an hour, where it published it. Worker starts are marked too
(job_workers): a deploy restarts the workers, so these are deploy-like moments even when
no version changed (and a crash's restart looks the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobwarden.console.data.database import CQ, Reader

#: range name -> (seconds shown, seconds per bucket)
RANGES = {"24h": (86400, 300), "7d": (7 * 86400, 3600)}
DEFAULT_RANGE = "24h"
#: Worker starts read for one chart: a fleet restarting in a loop is marked, not listed.
STARTS_LIMIT = 500


@dataclass(frozen=True)
class DurationBucket:
    """One bucket: executions that ended in [start, start + bucket_s), and their p50 and
    p95 durations in milliseconds (None when none ended)."""

    start: datetime
    end: datetime
    executions: int
    p50_ms: float | None
    p95_ms: float | None


@dataclass(frozen=True)
class VersionMark:
    """A handler version's first run: `at` is the start of the first execution of its
    first worker (`ran`), or when that worker published it (not `ran`)."""

    version: int
    at: datetime
    ran: bool
    published_at: datetime
    worker: str


@dataclass(frozen=True)
class StartMark:
    """Workers of the type that started within one bucket (`bucket`, its index)."""

    bucket: int
    at: datetime
    workers: tuple[str, ...]


@dataclass
class DurationHistory:
    job_type: str
    range: str
    bucket_s: int
    #: every bucket of the range, oldest first; the last one is the current, still filling
    buckets: list[DurationBucket]
    versions: list[VersionMark]
    starts: list[StartMark]
    #: more workers started in the range than STARTS_LIMIT: the later ones are not marked
    starts_capped: bool = False

    @property
    def start(self) -> datetime:
        return self.buckets[0].start

    @property
    def end(self) -> datetime:
        return self.buckets[-1].end

    @property
    def executions(self) -> int:
        return sum(b.executions for b in self.buckets)


def _epoch(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def duration_history(reader: Reader, job_type: str, range_name: str = DEFAULT_RANGE
                     ) -> DurationHistory:
    """The chart's data for `range_name` ("24h" or "7d"; anything else is "24h")."""
    if range_name not in RANGES:
        range_name = DEFAULT_RANGE
    range_s, bucket_s = RANGES[range_name]
    count = range_s // bucket_s
    last = int(reader.row(CQ.console_type_duration_window, bucket_s=bucket_s)["last_bucket"])
    first = last - count + 1
    since, until = _epoch(first * bucket_s), _epoch((last + 1) * bucket_s)
    found = {int(r["bucket"]): r for r in reader.all(
        CQ.console_type_durations, type=job_type, bucket_s=bucket_s, first=first, last=last)}
    buckets = []
    for n in range(first, last + 1):
        row = found.get(n)
        buckets.append(DurationBucket(
            _epoch(n * bucket_s), _epoch((n + 1) * bucket_s), int(row["executions"]) if row else 0,
            _float(row["p50_ms"]) if row else None, _float(row["p95_ms"]) if row else None))
    versions = []
    for v in reader.all(CQ.console_type_versions, type=job_type, since=since):
        ran = v["first_run_at"] is not None
        at = v["first_run_at"] if ran else v["first_at"]
        if since <= at < until:
            versions.append(VersionMark(int(v["version"]), at, ran, v["first_at"],
                                        v["first_by"]))
    started = reader.all(CQ.console_type_worker_starts, type=job_type, since=since,
                         until=until, limit=STARTS_LIMIT + 1)
    by_bucket: dict[int, list[str]] = {}
    for w in started[:STARTS_LIMIT]:
        index = int(w["started_at"].timestamp() // bucket_s) - first
        by_bucket.setdefault(index, []).append(w["worker_id"])
    starts = [StartMark(i, buckets[i].start, tuple(ids)) for i, ids in sorted(by_bucket.items())
              if 0 <= i < count]
    return DurationHistory(job_type, range_name, bucket_s, buckets, versions, starts,
                           starts_capped=len(started) > STARTS_LIMIT)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
