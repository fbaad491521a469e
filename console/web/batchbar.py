"""A batch's progress as one bar (console/web/charts.py marks, drawn by _chart.html).

One segment per state that holds members (console/data/batches.py's PROGRESS_STATES),
its width its share of the members: server-rendered SVG, no script. A state is told by
its words too (each segment's tooltip, the chart's name, and the counts beside it), never
by colour alone. A state with few members among many keeps a sliver (MIN_WIDTH) so that
one failed member of 10,000 still shows.
"""

from __future__ import annotations

from collections.abc import Callable

from jobwarden.console.data.batches import PROGRESS_STATES, Progress
from jobwarden.console.web.charts import Bar, Chart, Mark

#: The narrowest segment drawn for a state that holds any member, in the bar's units.
MIN_WIDTH = 3.0


def widths(counts: list[int], total: float) -> list[float]:
    """Each count's share of `total` units; a non-zero count gets at least MIN_WIDTH,
    taken from the wider segments in proportion (the sum stays `total`)."""
    members = sum(counts)
    if members <= 0:
        return [0.0] * len(counts)
    raw = [total * n / members for n in counts]
    small = [n > 0 and w < MIN_WIDTH for n, w in zip(counts, raw, strict=True)]
    owed = sum(MIN_WIDTH - w for w, s in zip(raw, small, strict=True) if s)
    wide = sum(w for w, s in zip(raw, small, strict=True) if not s)
    if not owed or wide <= owed:
        return raw
    return [MIN_WIDTH if s else w - owed * w / wide
            for w, s in zip(raw, small, strict=True)]


def progress_bar(progress: Progress, link: Callable[[str], str] | None = None, *,
                 size: tuple[int, int] = (600, 18), testid: str = "batch-bar") -> Chart:
    """The bar of `progress`, `size` pixels; `link(state)` is where a segment leads."""
    width, height = size
    counts = [max(progress.counts[s], 0) for s in PROGRESS_STATES]
    marks: list[Mark] = [Bar(0, 0, width, height, "batch-track",
                             "no members" if not progress.members else "")]
    x = 0.0
    for state, n, w in zip(PROGRESS_STATES, counts, widths(counts, width), strict=True):
        if n:
            marks.append(Bar(x, 0, w, height, f"batch-seg batch-{state}", f"{n} {state}",
                             href=link(state) if link else ""))
        x += w
    said = ", ".join(f"{n} {s}" for s, n in zip(PROGRESS_STATES, counts, strict=True) if n)
    label = (f"Batch progress: {progress.final} of {progress.members} members in a final "
             f"state" + (f" ({said})" if said else ""))
    return Chart("batch-bar", (0, 0, width, height), label, tuple(marks), testid=testid,
                 size=size)
