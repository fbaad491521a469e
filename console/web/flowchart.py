"""The flow page's graph as a chart (console/web/charts.py marks, drawn by _chart.html).

Layers run top to bottom, parents above their dependents; each box says its job (or its
group's type and count) and its status in words, so no state is told by colour alone
(the colours are CSS classes, with the page's legend). A box links to its job, a group
to the jobs list filtered to the flow, its type and its status.
"""

from __future__ import annotations

from collections.abc import Callable

from jobwarden.console.data.flows import Box, Graph
from jobwarden.console.web.charts import Bar, Chart, Label, Line, Mark

BOX_W, BOX_H = 168, 44
GAP_X, GAP_Y = 16, 40
MARGIN = 8
TEXT_MAX = 24


def _short(text: str, most: int = TEXT_MAX) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


def describe(box: Box) -> tuple[str, str]:
    """A box's two lines of text: what it holds, and its status with how many are held."""
    first = f"#{box.job_id} {box.type}" if box.job_id is not None else box.type
    second = box.status if box.jobs == 1 else f"{box.jobs} × {box.status}"
    if box.held:
        second += f" · {box.held} held"
    return _short(first), _short(second, TEXT_MAX + 4)


def flow_chart(graph: Graph, link: Callable[[Box], str], total: int) -> Chart:
    """The graph's chart: `link(box)` is where a box leads; `total` the jobs drawn."""
    widest = max((len(row) for row in graph.layers), default=1)
    width = MARGIN * 2 + widest * BOX_W + (widest - 1) * GAP_X
    height = MARGIN * 2 + len(graph.layers) * BOX_H + max(len(graph.layers) - 1, 0) * GAP_Y
    where: dict[tuple[object, ...], tuple[float, float]] = {}
    boxes: list[Mark] = []
    for r, row in enumerate(graph.layers):
        used = len(row) * BOX_W + (len(row) - 1) * GAP_X
        left = (width - used) / 2
        y = MARGIN + r * (BOX_H + GAP_Y)
        for i, box in enumerate(row):
            x = left + i * (BOX_W + GAP_X)
            where[box.key] = (x, y)
            first, second = describe(box)
            css = f"flow-box flow-{box.status}" + (" flow-held" if box.held else "")
            depth = (f"depth {box.depths[0]}" if box.depths[0] == box.depths[1]
                     else f"depths {box.depths[0]}–{box.depths[1]}")
            title = f"{first}: {second} ({depth})"
            boxes.append(Bar(x, y, BOX_W, BOX_H, css, title, href=link(box)))
            boxes.append(Label(x + 8, y + 18, first, "flow-text"))
            boxes.append(Label(x + 8, y + 35, second, "flow-text flow-status"))
    lines: list[Mark] = []
    for parent, child, n in graph.edges:
        (px, py), (cx, cy) = where[parent.key], where[child.key]
        lines.append(Line(((px + BOX_W / 2, py + BOX_H), (cx + BOX_W / 2, cy)), "flow-edge",
                          title=f"{n} edge(s)" if n > 1 else ""))
    drawn = sum(len(row) for row in graph.layers)
    label = (f"Flow graph: {total} jobs in {drawn} boxes over {len(graph.layers)} layers, "
             "parents above their dependents")
    return Chart("flow-chart", (0, 0, int(width), int(height)), label,
                 tuple(lines + boxes), testid="flow-graph", size=(int(width), int(height)))
