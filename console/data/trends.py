"""The overview's trend chart: completed, failed and retried per minute, drawn as SVG.

Read from the per-minute rollup (`job_minute_counts`, migration 0009), so the chart costs
the same at ten thousand jobs as at ten million. Drawn on the server as plain SVG: three
polylines, two axes with values, and one hover target per bucket with its numbers; no
chart library, because the page's CSP forbids inline script and a library would add more
than these sixty lines.
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
WIDTH, HEIGHT = 720, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 8, 8, 22


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

    @property
    def y_max(self) -> float:
        top = max([max(v) for v in self.series.values()] + list(self.usual.values()) + [1.0])
        return nice_ceiling(top)

    def x(self, i: int) -> float:
        span = WIDTH - LEFT - RIGHT
        return LEFT + span * i / max(1, self.buckets - 1)

    def y(self, value: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (1 - value / self.y_max)

    def points(self, outcome: str) -> str:
        return " ".join(f"{self.x(i):.1f},{self.y(v):.1f}"
                        for i, v in enumerate(self.series[outcome]))

    def y_ticks(self) -> list[tuple[float, str]]:
        return [(self.y(self.y_max * k / 4), _short(self.y_max * k / 4)) for k in range(5)]

    def x_ticks(self) -> list[tuple[float, str]]:
        """Labels for 'now' and evenly spaced ages back to the range's start."""
        total = self.buckets * self.bucket_s
        step = 900 if total <= 3600 else 6 * 3600
        ticks = []
        for age in range(0, total + 1, step):
            i = self.buckets - 1 - age // self.bucket_s
            # The last point is the last full minute, not the unfinished one.
            label = "last min" if age == 0 else (
                f"-{age // 60}m" if age < 3600 else f"-{age // 3600}h")
            ticks.append((self.x(max(i, 0)), label))
        return ticks

    def hover(self) -> list[tuple[float, float, str]]:
        """One (x, width, text) target per bucket: its age and each outcome's rate."""
        width = (WIDTH - LEFT - RIGHT) / max(1, self.buckets - 1)
        out = []
        for i in range(self.buckets):
            ended = (self.buckets - 1 - i) * self.bucket_s // 60 + 1
            values = ", ".join(f"{o} {self.series[o][i]:.1f}/min" for o in OUTCOMES)
            out.append((self.x(i) - width / 2, width,
                        f"{self.bucket_s // 60} min ending {ended} min ago: {values}"))
        return out


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is >= value."""
    magnitude = 1.0
    while magnitude * 10 <= value:
        magnitude *= 10
    while magnitude > value and magnitude > 1e-9:
        magnitude /= 10
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _short(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


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
