"""The overview's trends: completed, failed and retried per minute, and the usual rates.

Read from the per-minute rollup (`job_minute_counts`, migration 0009), so the chart costs
the same at ten thousand jobs as at ten million. console/web/charts.py draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobwarden.console.data.database import CQ, Reader

OUTCOMES = ("completed", "failed", "retried")
#: The headline's window: the latest full minutes, short enough that a drop in
#: completions shows within minutes (a last-hour average barely moves).
RECENT_MINUTES = 10
#: range name -> (seconds shown, seconds per bucket)
RANGES = {"1h": (3600, 60), "24h": (86400, 600)}


@dataclass
class Trend:
    range: str
    queue: str | None
    job_type: str | None
    buckets: int
    bucket_s: int
    #: outcome -> jobs per minute, oldest bucket first, up to the last full minute
    series: dict[str, list[float]]
    #: outcome -> jobs of the current minute so far (not drawn as a rate: it is not over)
    this_minute: dict[str, int] = field(default_factory=dict)
    #: outcome -> the usual jobs per minute at this hour on the previous 7 days
    usual: dict[str, float] = field(default_factory=dict)
    usual_days: int = 0

    @property
    def recent_rate(self) -> dict[str, float]:
        """Jobs per minute over the last RECENT_MINUTES full minutes, per outcome (a
        bucket is never longer than that, so the window is whole buckets)."""
        n = max(1, RECENT_MINUTES * 60 // self.bucket_s)
        return {o: sum(v[-n:]) / n for o, v in self.series.items()}


def trend(reader: Reader, range_name: str = "1h", queue: str | None = None,
          job_type: str | None = None) -> Trend:
    """The chart for `range_name` ("1h" or "24h"), all queues or one, all types or one."""
    if range_name not in RANGES:
        range_name = "1h"
    range_s, bucket_s = RANGES[range_name]
    buckets = range_s // bucket_s
    series = {o: [0.0] * buckets for o in OUTCOMES}
    this_minute = dict.fromkeys(OUTCOMES, 0)
    per_minute = bucket_s / 60
    for row in reader.all(CQ.console_trend, range_s=range_s, bucket_s=bucket_s, queue=queue,
                          type=job_type):
        if row["bucket"] == -1:
            this_minute[row["outcome"]] += row["jobs"]
        elif 0 <= row["bucket"] < buckets:
            series[row["outcome"]][buckets - 1 - row["bucket"]] += row["jobs"] / per_minute
    usual_rows = reader.all(CQ.console_usual_rate, queue=queue, type=job_type)
    usual = {r["outcome"]: float(r["per_minute"]) for r in usual_rows}
    days = max((r["days"] for r in usual_rows), default=0)
    return Trend(range_name, queue, job_type, buckets, bucket_s, series, this_minute, usual,
                 days)
