"""SLA panels: per job type, its target and how the last hour measured against it.

A type's target is, in order: the console's configuration (JOBWARDEN_SLA), the handler's
declaration (`@job(..., sla="30s")`, which its workers publish to `job_types`, so the
console imports no application code), then JOBWARDEN_SLA_DEFAULT. The target bounds
time-to-start: from the moment a job may run until a worker starts it.

The hour's percentiles come from the `job_timings` rollup (migration 0086): counts per
log bucket of ratio 2^(1/8), so a percentile is its bucket's upper edge, at most 9.05%
above the exact one (`BUCKET_RATIO`) and never below it (at most 1 ms above under 1 ms).
Counts of executions are exact; "over target" counts the executions whose bucket reaches
past the target, so it may include some that waited up to 9.05% less than it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from jobwarden.console.data.database import CQ, Reader, Row

BUCKETS = 12  # 5-minute buckets over the last hour
#: Ratio of a timing bucket's upper edge to its lower one (sql/schema/timings.sql).
BUCKET_RATIO = 2 ** (1 / 8)


@dataclass(frozen=True)
class Interval:
    """One 5-minute bucket of the last hour: its worst time to start (None when no job
    started and none waits), how many jobs started, and whether it breached the target.
    console/web/charts.py draws them."""

    value: float | None
    minutes_ago: int  # the bucket's start: 5 for the newest, 60 for the oldest
    started: int
    breach: bool


@dataclass
class SlaRow:
    type: str
    target_s: float | None
    target_source: str
    pending: int = 0
    oldest_pending_s: float | None = None
    started: int = 0
    wait_p50_s: float | None = None
    wait_p95_s: float | None = None
    wait_p99_s: float | None = None
    duration_p50_ms: float | None = None
    duration_p95_ms: float | None = None
    duration_p99_ms: float | None = None
    over_target: int = 0  # executions started in the hour whose wait reached past the target
    finished: int = 0
    raised: int = 0  # executions whose handler raised (retry, failed, timeout, unknown)
    final: int = 0  # jobs that reached completed, failed, cancelled or skipped
    failed: int = 0  # ... of which failed (unknown is not a failure: it awaits review)
    unknown: int = 0
    buckets: list[Interval] = field(default_factory=list)

    @property
    def failure_rate(self) -> float | None:
        """Failed jobs among the jobs that reached a final outcome in the last hour."""
        return self.failed / self.final if self.final else None

    @property
    def raised_rate(self) -> float | None:
        """Executions that raised among the executions that finished in the last hour."""
        return self.raised / self.finished if self.finished else None

    @property
    def breach_reasons(self) -> list[str]:
        """Why the card says BREACHED, in words (empty when it does not)."""
        reasons = []
        if self.pending_breach:
            reasons.append("a job waiting now has passed the target")
        if _over(self.wait_p95_s, self.target_s):
            reasons.append("p95 time to start over the last hour is over the target")
        return reasons

    @property
    def pending_breach(self) -> bool:
        return _over(self.oldest_pending_s, self.target_s)

    @property
    def breached_buckets(self) -> int:
        return sum(1 for b in self.buckets if b.breach)

    @property
    def breached(self) -> bool:
        return self.pending_breach or _over(self.wait_p95_s, self.target_s)


def _over(value: float | None, target: float | None) -> bool:
    return value is not None and target is not None and value > target


def declared_targets(reader: Reader) -> dict[str, float]:
    """SLA targets the handlers declared, as their workers published them."""
    return {r["type"]: float(r["sla_seconds"]) for r in reader.all(CQ.console_job_type_slas)}


def target_for(job_type: str, configured: dict[str, float], declared: dict[str, float],
               default: float | None) -> tuple[float | None, str]:
    if job_type in configured:
        return configured[job_type], "configuration"
    if job_type in declared:
        return declared[job_type], "handler"
    if default is not None:
        return default, "default"
    return None, "none"


def sla_rows(reader: Reader, configured: dict[str, float], default: float | None) -> list[SlaRow]:
    """One row per job type seen in the last hour, pending, or with a target."""
    declared = declared_targets(reader)
    histograms: dict[str, dict[str, list[tuple[int, int]]]] = {}
    stats: dict[str, dict[str, int]] = {}
    for h in reader.all(CQ.console_sla_histograms):
        histograms.setdefault(h["type"], {}).setdefault(h["measure"], []).append(
            (h["bucket"], h["executions"]))
        if h["measure"] == "wait":
            s = stats.setdefault(h["type"], {"started": 0, "finished": 0, "raised": 0})
            s["started"] += h["executions"]
            s["finished"] += h["finished"]
            s["raised"] += h["raised"]
    pending = {r["type"]: r for r in reader.all(CQ.console_sla_pending_by_type)}
    outcomes = {r["type"]: r for r in reader.all(CQ.console_sla_outcomes_by_type)}
    buckets: dict[str, list[Row]] = {}
    for b in reader.all(CQ.console_sla_wait_buckets):
        buckets.setdefault(b["type"], []).append(b)
    names = sorted(set(stats) | set(pending) | set(configured) | set(declared))
    result = []
    for name in names:
        target, source = target_for(name, configured, declared, default)
        row = SlaRow(name, target, source)
        if name in pending:
            row.pending = pending[name]["pending"]
            row.oldest_pending_s = _f(pending[name]["oldest_pending_s"])
        if name in stats:
            st = stats[name]
            row.started, row.finished, row.raised = st["started"], st["finished"], st["raised"]
            waits = histograms[name].get("wait", [])
            runs = histograms[name].get("run", [])
            row.wait_p50_s, row.wait_p95_s, row.wait_p99_s = (
                _seconds(percentile(waits, q)) for q in (0.5, 0.95, 0.99))
            row.duration_p50_ms, row.duration_p95_ms, row.duration_p99_ms = (
                percentile(runs, q) for q in (0.5, 0.95, 0.99))
            if target is not None:
                row.over_target = sum(n for b, n in waits if upper_ms(b) > target * 1000)
        if name in outcomes:
            o = outcomes[name]
            row.final, row.failed, row.unknown = o["final"], o["failed"], o["unknown"]
        # The newest interval also counts the jobs still waiting: a job pending past its
        # target is a breach now, so the intervals agree with the BREACHED badge.
        row.buckets = intervals(buckets.get(name, []), target, row.oldest_pending_s)
        result.append(row)
    return result


def intervals(rows: list[Row], target: float | None,
              oldest_pending_s: float | None = None) -> list[Interval]:
    """The worst time to start per 5 minutes, oldest bucket first; the newest bucket
    includes the oldest job still waiting."""
    by_bucket = {r["bucket"]: r for r in rows if 0 <= r["bucket"] < BUCKETS}
    worst = [float(by_bucket[b]["worst_wait_s"]) if b in by_bucket else None
             for b in range(BUCKETS)]
    if oldest_pending_s is not None:
        worst[0] = max(worst[0] or 0.0, float(oldest_pending_s))
    return [Interval(worst[bucket], (bucket + 1) * 5,  # bucket 11 = 55-60 min ago
                     by_bucket[bucket]["started"] if bucket in by_bucket else 0,
                     _over(worst[bucket], target))
            for bucket in reversed(range(BUCKETS))]


def upper_ms(bucket: int) -> float:
    """The upper edge of a timing bucket, in milliseconds: bucket 0 holds [0, 1 ms),
    bucket b >= 1 holds [2^((b-1)/8), 2^(b/8)) ms (sql/schema/timings.sql)."""
    return 2 ** (max(bucket, 0) / 8)


def percentile(histogram: list[tuple[int, int]], q: float) -> float | None:
    """The q-quantile (nearest rank: the first time at or past q of the executions, as
    PostgreSQL's percentile_disc) of a histogram of (bucket, executions), read as its
    bucket's upper edge in ms; None for no execution."""
    total = sum(n for _, n in histogram)
    if total <= 0:
        return None
    rank = max(1, math.ceil(q * total - 1e-9))  # the float product may overshoot an integer
    seen = 0
    for bucket, n in sorted(histogram):
        seen += n
        if seen >= rank:
            return upper_ms(bucket)
    return upper_ms(max(b for b, _ in histogram))


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def _f(value: Any) -> float | None:
    return None if value is None else float(value)


def pending_breaches(reader: Reader, configured: dict[str, float],
                     default: float | None) -> list[SlaRow]:
    """Types whose oldest runnable pending job has waited longer than their target now.

    The cheap, firing-now half of `sla_rows` (no percentiles over the hour's executions):
    the overview lists these and the navigation counts them.
    """
    declared = declared_targets(reader)
    breaches = []
    for r in reader.all(CQ.console_sla_pending_by_type):
        target, source = target_for(r["type"], configured, declared, default)
        row = SlaRow(r["type"], target, source, pending=r["pending"],
                     oldest_pending_s=_f(r["oldest_pending_s"]))
        if row.pending_breach:
            breaches.append(row)
    return breaches
