"""The console's charts: their SVG geometry, computed here and drawn by one macro.

A `Chart` is a viewBox, an accessible name, an optional tooltip and its marks in the
viewBox's units: rules (<line>), bars (<rect>), labels (<text>) and lines (<polyline>),
each with its own tooltip; a mark's `tag` is the SVG element that draws it. The macro
`chart` in templates/_chart.html draws any chart, so every figure is plain SVG rendered
on the server: no script (the CSP forbids inline script) and no chart library. Marks
carry CSS classes (static/console.css), not colours.

Four charts are built here from the data layer's models: the SLA page's worst wait per
5 minutes (`sla_chart`), the overview's jobs per minute (`trend_chart`), a job type's
handler durations over a day or a week (`duration_chart`) and the failed groups' last
hour (`sparkline`). Their values are durations, rates and counts: a missing,
NaN or infinite value is drawn as no value and a negative one as zero, so one odd row
cannot break a page or flatten the scale of the others.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal

from jobwarden.console.data.durations import DurationHistory
from jobwarden.console.data.sla import SlaRow
from jobwarden.console.data.trends import OUTCOMES, Trend
from jobwarden.console.web.formatting import age

Anchor = Literal["start", "middle", "end"]


@dataclass(frozen=True)
class Rule:
    """A straight line: an axis, a grid line, a target or a usual rate."""

    tag: ClassVar[str] = "line"
    x1: float
    y1: float
    x2: float
    y2: float
    css: str
    title: str = ""


@dataclass(frozen=True)
class Bar:
    """A rectangle: a bar, or a transparent target that carries a tooltip; with `href`, a
    link (a flow's box leads to its job)."""

    tag: ClassVar[str] = "rect"
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str = ""
    href: str = ""


@dataclass(frozen=True)
class Label:
    """A text: an axis value, a legend word, a flag over a bar."""

    tag: ClassVar[str] = "text"
    x: float
    y: float
    text: str
    css: str
    anchor: Anchor = "start"
    testid: str = ""
    title: str = ""


@dataclass(frozen=True)
class Line:
    """A series of points joined (a polyline); `outcome` names the series for tests and
    scripts that pick one (data-outcome)."""

    tag: ClassVar[str] = "polyline"
    points: tuple[tuple[float, float], ...]
    css: str = ""
    outcome: str = ""
    title: str = ""

    @property
    def points_text(self) -> str:
        return " ".join(f"{x:.1f},{y:.1f}" for x, y in self.points)


Mark = Rule | Bar | Label | Line


@dataclass(frozen=True)
class Chart:
    css: str
    view_box: tuple[int, int, int, int]
    #: What the chart shows, in words (aria-label): a screen reader's whole figure.
    label: str
    marks: tuple[Mark, ...]
    title: str = ""
    testid: str = ""
    #: Fixed width and height in pixels; None lets the page's CSS size the chart.
    size: tuple[int, int] | None = None


def drawable(value: float | None) -> float | None:
    """The value as drawn: None when missing, NaN or infinite; zero when below zero."""
    if value is None or not math.isfinite(value):
        return None
    return max(0.0, float(value))


def highest(values: Iterable[float | None], floor: float) -> float:
    """The highest drawable value, and at least `floor`."""
    return max([v for v in map(drawable, values) if v is not None] + [floor])


@dataclass(frozen=True)
class Scale:
    """Values from 0 to `top` onto the y axis: 0 at `base`, `top` at `span` above it
    (SVG's y grows downwards). A value outside 0..top is drawn at the nearer end."""

    base: float
    span: float
    top: float

    def y(self, value: float | None) -> float:
        share = (drawable(value) or 0.0) / self.top if self.top > 0 else 0.0
        return self.base - self.span * min(share, 1.0)


def spread(i: int, count: int, left: float, width: float) -> float:
    """The x of point i of `count` points spread evenly from left to left + width."""
    return left + width * i / max(1, count - 1)


def headroom(top: float) -> float:
    """The scale's top a tenth above the highest value, so that the highest bar or line
    does not touch the chart's edge (never infinite: the label must stay a number)."""
    return min(top * 1.1, sys.float_info.max)


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is >= value (an axis that
    reads in round numbers); a value too large for the next round one is its own."""
    if not math.isfinite(value) or value <= 0:
        return 1.0
    magnitude = 1.0
    while magnitude * 10 <= value:
        magnitude *= 10
    while magnitude > value and magnitude > 1e-9:
        magnitude /= 10
    for step in (1, 2, 2.5, 5, 10):
        nice = step * magnitude
        if nice >= value:
            return nice if math.isfinite(nice) else value
    return value


def short_number(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


# The SLA chart: 12 bars of 5 minutes in a 240 x 60 plot; its y axis's values sit in the
# 40 units left of the plot and its time axis in the 12 units under it.
SLA_W, SLA_H = 240, 60


def sla_chart(row: SlaRow) -> Chart:
    """Worst time to start per 5 minutes, oldest on the left, red where over the target,
    with the target as a dashed line."""
    scale = Scale(SLA_H, SLA_H, headroom(highest(
        [b.value for b in row.buckets] + [row.target_s], 1e-9)))
    slot = SLA_W / max(1, len(row.buckets))
    marks: list[Mark] = [Rule(0, SLA_H, SLA_W, SLA_H, "baseline")]
    for i, b in enumerate(row.buckets):
        value = drawable(b.value)
        # The shortest measured bar stays visible (a wait of 0 s was measured all the same).
        height = 0.0 if value is None else max(1.0, SLA_H - scale.y(value))
        x, top = i * slot + 1, SLA_H - height
        over = " — over target" if b.breach else ""
        marks.append(Bar(x, top, slot - 2, height, "bar bar-breach" if b.breach else "bar",
                         f"{b.minutes_ago}–{b.minutes_ago - 5} min ago: worst wait "
                         f"{age(value)}, {b.started} started{over}"))
        if b.breach:
            marks.append(Label(x + (slot - 2) / 2, max(top - 2, 8), "!", "flag", "middle"))
    target = drawable(row.target_s)
    if target is not None:
        y = scale.y(target)
        marks += [Rule(0, y, SLA_W, y, "target"),
                  Label(SLA_W - 2, max(y - 2, 8), "target", "target-label", "end")]
    marks += [Label(-3, 8, age(scale.top), "axis", "end", testid="y-max"),
              Label(-3, SLA_H, "0", "axis", "end"),
              Label(0, SLA_H + 10, "60 min ago", "axis"),
              Label(SLA_W, SLA_H + 10, "now", "axis", "end")]
    return Chart("chart sla-chart", (-40, 0, SLA_W + 40, SLA_H + 12),
                 f"Worst time to start per 5 minutes over the last hour for {row.type}",
                 tuple(marks), title=f"Worst time to start per 5 minutes, last hour ({row.type})")


# The trend chart: a 720 x 180 box; the y axis's values in the 56 units on the left, the
# time axis in the 22 units at the bottom.
TREND_W, TREND_H = 720, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 8, 8, 22


def trend_chart(trend: Trend) -> Chart:
    """Jobs per minute by outcome: one line each, its usual rate dashed, round values on
    the y axis, ages on the time axis, and one hover target per bucket with its numbers."""
    plot_w, plot_h = TREND_W - LEFT - RIGHT, TREND_H - TOP - BOTTOM
    values = [v for series in trend.series.values() for v in series]
    scale = Scale(TOP + plot_h, plot_h,
                  nice_ceiling(highest(values + list(trend.usual.values()), 1.0)))

    def x(i: int) -> float:
        return spread(i, trend.buckets, LEFT, plot_w)

    marks: list[Mark] = []
    for k in range(5):
        value = scale.top * k / 4
        y = scale.y(value)
        marks += [Rule(LEFT, y, TREND_W - RIGHT, y, "grid"),
                  Label(LEFT - 4, y + 4, short_number(value), "axis", "end")]
    for n, (i, text) in enumerate(_ages(trend)):
        # the first is the right edge's ("last min"): anchored at its end so it is not cut
        marks.append(Label(x(i), TREND_H - 6, text, "axis", "end" if n == 0 else "middle"))
    for outcome in OUTCOMES:
        if outcome in trend.usual:
            usual = trend.usual[outcome]
            y = scale.y(usual)
            marks.append(Rule(LEFT, y, TREND_W - RIGHT, y, f"usual usual-{outcome}",
                              f"usual {outcome}: {usual:.1f}/min"))
        marks.append(Line(tuple((x(i), scale.y(v)) for i, v in enumerate(trend.series[outcome])),
                          f"series series-{outcome}", outcome))
    half = plot_w / max(1, trend.buckets - 1) / 2
    for i in range(trend.buckets):
        ended = (trend.buckets - 1 - i) * trend.bucket_s // 60 + 1
        rates = ", ".join(f"{o} {trend.series[o][i]:.1f}/min" for o in OUTCOMES)
        # Half a bucket either side of its point; the first and last stop at the chart's
        # edges (reached only when there are few buckets).
        left, right = max(0.0, x(i) - half), min(float(TREND_W), x(i) + half)
        marks.append(Bar(left, TOP, right - left, plot_h, "hover",
                         f"{trend.bucket_s // 60} min ending {ended} min ago: {rates}"))
    return Chart("trend-chart", (0, 0, TREND_W, TREND_H), f"jobs per minute, {trend.range}",
                 tuple(marks), testid="trend-chart")


def _ages(trend: Trend) -> list[tuple[int, str]]:
    """(bucket, label) for 'now' and evenly spaced ages back to the range's start."""
    total = trend.buckets * trend.bucket_s
    step = 900 if total <= 3600 else 6 * 3600
    ticks = []
    for age_s in range(0, total + 1, step):
        # The last point is the last full minute, not the unfinished one.
        text = "last min" if age_s == 0 else (
            f"-{age_s // 60}m" if age_s < 3600 else f"-{age_s // 3600}h")
        ticks.append((max(trend.buckets - 1 - age_s // trend.bucket_s, 0), text))
    return ticks


# The duration chart: the trend chart's box and margins, 18 units above the plot for the
# versions' labels.
DUR_W, DUR_H = 720, 200
DUR_TOP = 18
#: The shortest dash a bucket with no neighbour is drawn as (a day's 5 minutes are 2.3).
LONE_DASH = 6
#: The duration chart's lines: (series, the bucket's field).
PERCENTILES = (("p50", "p50_ms"), ("p95", "p95_ms"))


def duration_chart(history: DurationHistory) -> Chart:
    """p50 and p95 of a type's handler durations per bucket, oldest on the left: one line
    each, broken where a bucket had no execution (a lone bucket is a short dash); round
    durations on the y axis, ages on the time axis, one hover target per bucket with its
    numbers; a dashed rule where a handler version first ran, labelled with it, and a tick
    on the time axis where workers of the type started."""
    plot_w, plot_h = DUR_W - LEFT - RIGHT, DUR_H - DUR_TOP - BOTTOM
    base = DUR_TOP + plot_h
    scale = Scale(base, plot_h, nice_ceiling(highest(
        [b.p95_ms for b in history.buckets] + [b.p50_ms for b in history.buckets], 1.0)))
    span = (history.end - history.start).total_seconds()

    def at(moment: datetime) -> float:
        return LEFT + plot_w * (moment - history.start).total_seconds() / span

    slot = plot_w / len(history.buckets)
    marks: list[Mark] = []
    for k in range(5):
        value = scale.top / 4 * k  # not top * k: a top near the float's limit overflows
        y = scale.y(value)
        marks += [Rule(LEFT, y, DUR_W - RIGHT, y, "grid"),
                  Label(LEFT - 4, y + 4, age(value / 1000), "axis", "end")]
    step = 6 * 3600 if span <= 86400 else 86400
    for n, back in enumerate(range(0, int(span) + 1, step)):
        text = "now" if back == 0 else (f"-{back // 3600}h" if step < 86400
                                        else f"-{back // 86400}d")
        anchor: Anchor = "end" if n == 0 else ("start" if back >= span else "middle")
        marks.append(Label(DUR_W - RIGHT - plot_w * back / span, DUR_H - 6, text, "axis",
                           anchor))
    for series, field in PERCENTILES:
        run: list[tuple[float, float]] = []
        values: list[float | None] = [drawable(getattr(b, field)) for b in history.buckets]
        for i, ms in enumerate([*values, None]):
            if ms is not None:
                run.append((LEFT + slot * (i + 0.5), scale.y(ms)))
                continue
            if len(run) == 1:  # a lone bucket: a dash, not an invisible point
                (x, y), = run
                half = max(slot, LONE_DASH) / 2
                run = [(x - half, y), (x + half, y)]
            if run:
                marks.append(Line(tuple(run), f"series series-{series}", series))
            run = []
    for i, b in enumerate(history.buckets):
        if b.executions:
            marks.append(Bar(LEFT + slot * i, DUR_TOP, slot, plot_h, "hover",
                             f"{_span(b.start, history.bucket_s)}: p50 {_ms(b.p50_ms)}, "
                             f"p95 {_ms(b.p95_ms)} of {b.executions} execution(s)"))
    for v in history.versions:
        x = at(v.at)
        what = (f"version {v.version} first ran {v.at:%Y-%m-%d %H:%M} UTC (worker {v.worker})"
                if v.ran else f"version {v.version} published {v.at:%Y-%m-%d %H:%M} UTC by "
                f"worker {v.worker} (no execution of it within the hour)")
        marks += [Rule(x, DUR_TOP, x, base, "mark mark-version", what),
                  Label(x, DUR_TOP - 5, f"v{v.version}", "mark-label", "middle")]
    for s in history.starts:
        x = LEFT + slot * (s.bucket + 0.5)
        names = ", ".join(s.workers[:5]) + (" …" if len(s.workers) > 5 else "")
        marks.append(Rule(x, base, x, base - 8, "mark mark-start",
                          f"{len(s.workers)} worker(s) started "
                          f"{_span(s.at, history.bucket_s)}: {names}"))
    return Chart("duration-chart", (0, 0, DUR_W, DUR_H),
                 f"Handler duration p50 and p95 of {history.job_type} per "
                 f"{_every(history.bucket_s)}, last {history.range}", tuple(marks),
                 testid="duration-chart")


def _ms(value: float | None) -> str:
    shown = drawable(value)
    return "—" if shown is None else age(shown / 1000)


def _every(bucket_s: int) -> str:
    return f"{bucket_s // 60} minutes" if bucket_s < 3600 else f"{bucket_s // 3600} hour(s)"


def _span(start: datetime, bucket_s: int) -> str:
    end = start + timedelta(seconds=bucket_s)
    return f"{start:%Y-%m-%d %H:%M}–{end:%H:%M} UTC"


SPARK_W, SPARK_H = 120, 24


def sparkline(values: Sequence[float], label: str, title: str, css: str = "spark",
              testid: str = "sparkline") -> Chart:
    """A small line of `values`, oldest first, scaled to its own highest value."""
    scale = Scale(SPARK_H - 2, SPARK_H - 4, highest(values, 0.0) or 1.0)
    points = tuple((spread(i, len(values), 0, SPARK_W), scale.y(v))
                   for i, v in enumerate(values))
    return Chart(css, (0, 0, SPARK_W, SPARK_H), label, (Line(points),), title=title,
                 testid=testid, size=(SPARK_W, SPARK_H))


def failed_sparkline(group: Mapping[str, Any]) -> Chart:
    """A failed group's occurrences (failed, retried or unknown) per minute, last hour."""
    return sparkline(group["spark"], f"{group['spark_total']} in the last hour",
                     f"{group['spark_total']} failed or retried with this code in the last hour")


def retry_sparkline(group: Mapping[str, Any]) -> Chart:
    """A retrying group's retries per minute over the last hour."""
    return sparkline(group["spark"], f"{group['spark_total']} retries in the last hour",
                     f"{group['retries']} retried with this code in the last hour",
                     "spark spark-retry", "retrying-sparkline")
