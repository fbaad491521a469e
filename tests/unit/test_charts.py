"""The charts' geometry (console/web/charts.py) and the macro that draws it
(templates/_chart.html): every mark inside its chart's box whatever the values (none, one,
all zero, huge, NaN, below zero), the SLA bars and target where the page says they are,
and SVG with no script in it."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from jinja2 import Environment, FileSystemLoader, PrefixLoader

from jobwarden.console.data.durations import (
    DurationBucket,
    DurationHistory,
    StartMark,
    VersionMark,
)
from jobwarden.console.data.sla import Interval, SlaRow
from jobwarden.console.data.trends import OUTCOMES, Trend
from jobwarden.console.web import charts
from jobwarden.console.web.charts import Bar, Chart, Label, Line, Mark, Rule

M = TypeVar("M", Rule, Bar, Label, Line)
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
EDGES = {"none": [], "one": [7.0], "all zero": [0.0] * 12, "huge": [1.0, 1e308, 2.0],
         "nan": [math.nan, 3.0, math.inf], "below zero": [-5.0, 2.0]}


def sla_row(values: Sequence[float | None], target: float | None = 30.0) -> SlaRow:
    row = SlaRow("send_email", target, "configuration")
    row.buckets = [Interval(v, 5 * (len(values) - i), 1,
                            v is not None and target is not None and v > target)
                   for i, v in enumerate(values)]
    return row


def trend(values: Sequence[float], usual: float | None = None) -> Trend:
    series = {o: list(values) if o == "completed" else [0.0] * len(values) for o in OUTCOMES}
    return Trend("1h", None, None, len(values), 60, series,
                 usual={} if usual is None else {"completed": usual})


def points(mark: Mark) -> list[tuple[float, float]]:
    if isinstance(mark, Rule):
        return [(mark.x1, mark.y1), (mark.x2, mark.y2)]
    if isinstance(mark, Bar):
        return [(mark.x, mark.y), (mark.x + mark.width, mark.y + mark.height)]
    if isinstance(mark, Label):
        return [(mark.x, mark.y)]
    return list(mark.points)


def outside(chart: Chart) -> list[tuple[str, float, float]]:
    """Every point of a mark that is not a finite number inside the chart's viewBox."""
    left, top, width, height = chart.view_box
    return [(mark.tag, x, y) for mark in chart.marks for x, y in points(mark)
            if not (math.isfinite(x) and math.isfinite(y)
                    and left <= x <= left + width and top <= y <= top + height)]


def of(chart: Chart, kind: type[M], css: str = "") -> list[M]:
    """The chart's marks of one kind, with the CSS class `css` when given."""
    return [m for m in chart.marks if isinstance(m, kind) and (not css or css in m.css.split())]


@pytest.mark.parametrize("values", EDGES.values(), ids=EDGES.keys())
def test_every_chart_keeps_every_mark_inside_its_box(values: list[float]) -> None:
    built = [charts.sla_chart(sla_row(values)), charts.trend_chart(trend(values, usual=4.0)),
             charts.sparkline(values, "label", "title")]
    for chart in built:
        assert outside(chart) == [], chart.css
    bars = of(built[0], Bar)
    assert len(bars) == len(values)
    assert all(b.height >= 0 for b in bars)
    assert [len(line.points) for line in of(built[1], Line)] == [len(values)] * 3
    assert len(of(built[2], Line)[0].points) == len(values)


def test_sla_bars_stand_on_the_axis_scaled_to_the_highest_value_or_target() -> None:
    chart = charts.sla_chart(sla_row([None, 10.0, 60.0, 0.0], target=30.0))
    none, ten, sixty, zero = of(chart, Bar)
    # the highest of the values and the target is 1/1.1 of the chart's height
    assert sixty.height == pytest.approx(60 / 1.1) and ten.height == pytest.approx(10 / 1.1)
    assert all(b.y + b.height == pytest.approx(charts.SLA_H) for b in (none, ten, sixty, zero))
    assert none.height == 0 and zero.height == 1  # a measured 0 s still shows
    assert [b.x for b in (none, ten, sixty, zero)] == [1, 61, 121, 181]  # 240 / 4 slots
    assert sixty.css == "bar bar-breach" and ten.css == "bar"
    assert sixty.title.endswith("worst wait 1m 00s, 1 started — over target")
    assert none.title == "20–15 min ago: worst wait —, 1 started"
    [flag] = of(chart, Label, "flag")
    assert (flag.x, flag.y) == (150, 8)  # over the bar's middle, kept under the chart's top
    [target] = of(chart, Rule, "target")
    assert target.y1 == target.y2 == pytest.approx(60 - 30 / 1.1)
    assert [m.text for m in of(chart, Label, "axis")] == ["1m 06s", "0", "60 min ago", "now"]


def test_sla_chart_without_a_target_draws_no_target_line() -> None:
    chart = charts.sla_chart(sla_row([2.0], target=None))
    assert of(chart, Rule, "target") == [] and of(chart, Label, "target-label") == []
    assert chart.label == "Worst time to start per 5 minutes over the last hour for send_email"


def test_a_value_that_is_not_a_number_is_no_bar_and_leaves_the_scale_alone() -> None:
    chart = charts.sla_chart(sla_row([math.nan, 10.0, math.inf], target=None))
    nan, ten, inf = of(chart, Bar)
    assert nan.height == inf.height == 0 and "worst wait —" in nan.title
    assert ten.height == pytest.approx(60 / 1.1)


def test_a_huge_value_keeps_the_scale_a_number() -> None:
    chart = charts.sla_chart(sla_row([1e308, 1.0], target=30.0))
    huge, small = of(chart, Bar)
    assert huge.height == pytest.approx(60 / 1.1) and small.height == 1
    y_max = [m for m in of(chart, Label) if m.testid == "y-max"][0]
    assert re.fullmatch(r"\d+d \d+h", y_max.text)
    lines = charts.trend_chart(trend([1e308, 0.0]))
    assert of(lines, Line, "series-completed")[0].points[0][1] == charts.TOP


def test_trend_points_span_the_plot_from_oldest_to_the_last_minute() -> None:
    chart = charts.trend_chart(trend([0.0, 5.0, 10.0], usual=2.0))
    [line] = of(chart, Line, "series-completed")
    bottom = charts.TREND_H - charts.BOTTOM
    # from the plot's bottom left (0 at the oldest) to its top right (10, the axis's top)
    assert line.points_text == "56.0,158.0 384.0,83.0 712.0,8.0"
    assert line.outcome == "completed"
    assert [m.text for m in of(chart, Label, "axis")][:5] == ["0", "2.5", "5", "7.5", "10"]
    [usual] = of(chart, Rule, "usual-completed")
    assert usual.y1 == pytest.approx(bottom - 150 * 2 / 10)
    assert usual.title == "usual completed: 2.0/min"
    hover = of(chart, Bar, "hover")
    assert [h.title for h in hover][-1] == (
        "1 min ending 1 min ago: completed 10.0/min, failed 0.0/min, retried 0.0/min")
    # each hover target is centred on its point; the ends stop at the chart's edges
    assert hover[1].x + hover[1].width / 2 == pytest.approx(384)
    assert (hover[0].x, hover[-1].x + hover[-1].width) == (0, charts.TREND_W)


def test_the_trend_axis_reads_in_round_numbers() -> None:
    assert [charts.nice_ceiling(v) for v in (1, 3, 7, 11, 24, 999, 1001)] == [
        1, 5, 10, 20, 25, 1000, 2000]
    assert charts.nice_ceiling(math.nan) == charts.nice_ceiling(0) == 1
    assert charts.nice_ceiling(1e308) == 1e308


def test_sparkline_scales_to_its_own_highest_value() -> None:
    chart = charts.sparkline([0, 2, 4], "6 in the last hour", "six", "spark spark-retry")
    assert of(chart, Line)[0].points == ((0, 22), (60, 12), (120, 2))
    assert of(charts.sparkline([0, 0], "", ""), Line)[0].points == ((0, 22), (120, 22))
    assert chart.size == (120, 24) and chart.css == "spark spark-retry"


def render(chart: Chart) -> str:
    env = Environment(loader=PrefixLoader({"jobwarden": FileSystemLoader(TEMPLATES)}),
                      autoescape=True)
    return env.from_string('{% from "jobwarden/_chart.html" import chart %}{{ chart(c) }}'
                           ).render(c=chart)


def test_the_macro_draws_svg_with_its_names_and_tooltips_and_no_script() -> None:
    html = render(charts.sla_chart(sla_row([10.0, 60.0], target=30.0)))
    assert html.startswith('<svg class="chart sla-chart" viewBox="-40 0 280 72" role="img" '
                           'aria-label="Worst time to start per 5 minutes over the last hour '
                           'for send_email"><title>Worst time to start per 5 minutes, last '
                           'hour (send_email)</title>')
    assert ('<rect class="bar bar-breach" x="121.0" y="5.5" width="118.0" height="54.5">'
            '<title>5–0 min ago: worst wait 1m 00s, 1 started — over target</title></rect>'
            ) in html
    assert '<text class="axis" x="-3" y="8" text-anchor="end" data-testid="y-max">1m 06s</text>' in html
    assert not re.search(r"<script|\son\w+=|javascript:", html, re.I)
    spark = render(charts.sparkline([1, 0], "1 in the last hour", "one"))
    assert spark == ('<svg class="spark" viewBox="0 0 120 24" width="120" height="24" '
                     'role="img" data-testid="sparkline" aria-label="1 in the last hour">'
                     '<title>one</title>\n  <polyline points="0.0,2.0 120.0,22.0"></polyline>\n'
                     '</svg>')


def test_the_macro_escapes_what_the_data_names() -> None:
    row = sla_row([1.0])
    row.type = '"><script>alert(1)</script>'
    html = render(charts.sla_chart(row))
    assert "<script" not in html and "&lt;script&gt;" in html


T0 = datetime(2026, 12, 6, 0, 0, tzinfo=UTC)


def durations(p50: Sequence[float | None], p95: Sequence[float | None] | None = None,
              versions: Sequence[VersionMark] = (), starts: Sequence[StartMark] = (),
              bucket_s: int = 300) -> DurationHistory:
    p95 = p50 if p95 is None else p95
    buckets = [DurationBucket(T0 + timedelta(seconds=i * bucket_s),
                              T0 + timedelta(seconds=(i + 1) * bucket_s),
                              0 if a is None else 3, a, b)
               for i, (a, b) in enumerate(zip(p50, p95, strict=True))]
    return DurationHistory("report.build", "24h", bucket_s, buckets, list(versions),
                           list(starts))


def flat(line: Line) -> list[float]:
    return [c for point in line.points for c in point]


@pytest.mark.parametrize("values", [v for v in EDGES.values() if v], ids=[
    k for k, v in EDGES.items() if v])
def test_the_duration_chart_keeps_every_mark_inside_its_box(values: list[float]) -> None:
    chart = charts.duration_chart(durations(values, [v * 2 for v in values]))
    assert outside(chart) == []


def test_duration_lines_break_where_a_bucket_had_no_execution() -> None:
    history = durations([100.0, 200.0, None, 400.0, None], [150.0, 800.0, None, 1000.0, None])
    chart = charts.duration_chart(history)
    p50 = of(chart, Line, "series-p50")
    p95 = of(chart, Line, "series-p95")
    assert [line.outcome for line in p50 + p95] == ["p50"] * 2 + ["p95"] * 2
    slot = (charts.DUR_W - charts.LEFT - charts.RIGHT) / 5
    base = charts.DUR_H - charts.BOTTOM
    plot_h = base - charts.DUR_TOP

    def y(ms: float) -> float:  # the axis reads 0 to 1s (the highest, 1000 ms)
        return base - plot_h * ms / 1000

    # two neighbours joined at their buckets' middles; the lone one a dash across its slot
    assert flat(p50[0]) == pytest.approx(
        [charts.LEFT + slot / 2, y(100), charts.LEFT + 1.5 * slot, y(200)])
    assert flat(p50[1]) == pytest.approx(
        [charts.LEFT + 3 * slot, y(400), charts.LEFT + 4 * slot, y(400)])
    assert p95[1].points[0][1] == pytest.approx(charts.DUR_TOP)
    assert [m.text for m in of(chart, Label, "axis")][:5] == [
        "0ms", "250ms", "500ms", "750ms", "1.0s"]
    hover = of(chart, Bar, "hover")
    assert len(hover) == 3  # the buckets with executions
    assert hover[0].title == ("2026-12-06 00:00–00:05 UTC: p50 100ms, p95 150ms of "
                              "3 execution(s)")


def test_a_lone_bucket_of_a_week_is_still_a_visible_dash() -> None:
    chart = charts.duration_chart(durations([None] * 100 + [5.0] + [None] * 67,
                                            bucket_s=3600))
    [line] = of(chart, Line, "series-p50")
    assert line.points[1][0] - line.points[0][0] == charts.LONE_DASH


def test_a_version_is_a_rule_at_its_moment_and_worker_starts_tick_their_bucket() -> None:
    ran = VersionMark(3, T0 + timedelta(hours=6), True, T0 + timedelta(hours=5, minutes=59),
                      "host:1:abc")
    published = VersionMark(4, T0 + timedelta(hours=12), False, T0 + timedelta(hours=12),
                             "host:2:def")
    starts = [StartMark(10, T0 + timedelta(minutes=50), ("a", "b"))]
    chart = charts.duration_chart(durations([50.0] * 288, versions=[ran, published],
                                            starts=starts))
    plot_w = charts.DUR_W - charts.LEFT - charts.RIGHT
    six, twelve = of(chart, Rule, "mark-version")
    assert six.x1 == six.x2 == pytest.approx(charts.LEFT + plot_w / 4)
    assert twelve.x1 == pytest.approx(charts.LEFT + plot_w / 2)
    assert six.title == "version 3 first ran 2026-12-06 06:00 UTC (worker host:1:abc)"
    assert "published" in twelve.title and "no execution" in twelve.title
    assert [m.text for m in of(chart, Label, "mark-label")] == ["v3", "v4"]
    [tick] = of(chart, Rule, "mark-start")
    assert tick.x1 == pytest.approx(charts.LEFT + plot_w * 10.5 / 288)
    assert tick.title == "2 worker(s) started 2026-12-06 00:50–00:55 UTC: a, b"
    assert [m.text for m in of(chart, Label, "axis")][5:] == [
        "now", "-6h", "-12h", "-18h", "-24h"]


def test_the_duration_chart_escapes_a_workers_name() -> None:
    evil = VersionMark(2, T0 + timedelta(hours=1), True, T0, '"><script>alert(1)</script>')
    html = render(charts.duration_chart(durations([1.0] * 288, versions=[evil])))
    assert "<script" not in html and "&lt;script&gt;" in html
