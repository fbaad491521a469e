"""Flows in the console: the jobs connected to one job, laid out by depth, and what holds them.

A flow is every job reached from one job by following dependency edges both ways
(docs/guide/flows.md), at most MAX_NODES of them: the page says when it was cut. Its
graph is laid out in layers, a job one layer below its deepest parent; a large flow is
drawn as groups (the jobs of one layer, type and status in one box with their count), so
at most MAX_LAYERS layers of MAX_ROW boxes are drawn whatever the flow's size
(console/web/flowchart.py draws them).
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from jobwarden.console.data.database import CQ, Reader, Row
from jobwarden.worker.ops.operations import TAKES_DEPENDENTS
from jobwarden.worker.store.schema import JOB_STATUSES

#: The most jobs a flow page (or a flow filter) walks: the page says when a flow is cut.
MAX_NODES = 5000
#: A flow of at most this many jobs is drawn job by job; a larger one in groups.
INDIVIDUAL_MAX = 40
#: The most layers drawn: deeper flows put several depths in one layer.
MAX_LAYERS = 30
#: The most boxes in one layer: the rest of the layer's jobs go in one "other" box.
MAX_ROW = 12
#: The held jobs a flow page lists.
HELD_SHOWN = 200


@dataclass(frozen=True)
class Walk:
    """The jobs of one flow (rows of console_flow_nodes) and its edges; `cut` when it had
    more jobs than walked."""

    root: int
    nodes: list[Row]
    edges: list[Row]
    cut: bool


@dataclass
class Box:
    """One box of the graph: a job (`job_id`), or a group of jobs of one type and status
    in one layer (`status` "mixed" for a layer's overflow), with how many of its jobs a
    failed, cancelled, skipped or unknown parent holds."""

    key: tuple[Any, ...]
    layer: int
    type: str
    status: str
    jobs: int = 0
    job_id: int | None = None
    first_id: int | None = None
    held: int = 0
    depths: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Graph:
    """What the flow page draws: boxes by layer, edges between boxes (parent box, child
    box, how many job edges), and whether it groups jobs."""

    layers: list[list[Box]]
    edges: list[tuple[Box, Box, int]]
    grouped: bool
    depth_per_layer: int


@dataclass(frozen=True)
class Flow:
    walk: Walk
    counts: dict[str, int]
    held: list[Row]
    held_total: int
    graph: Graph
    types: list[str] = field(default_factory=list)


def walk(reader: Reader, job_id: int, limit: int = MAX_NODES) -> Walk | None:
    """The flow of `job_id` (None: no such job), at most `limit` jobs."""
    ids = [r["id"] for r in reader.all(CQ.console_flow_walk, job_id=job_id, limit=limit + 1)]
    if not ids:
        return None
    cut = len(ids) > limit
    ids = ids[:limit]
    return Walk(job_id, reader.all(CQ.console_flow_nodes, ids=ids),
                reader.all(CQ.console_flow_edges, ids=ids), cut)


def member_ids(reader: Reader, job_id: int, limit: int = MAX_NODES) -> list[int]:
    """The ids of the jobs of `job_id`'s flow (the jobs list's `flow=` filter), at most
    `limit`; [] for a job that does not exist."""
    return [r["id"] for r in reader.all(CQ.console_flow_walk, job_id=job_id, limit=limit)]


def read(reader: Reader, job_id: int) -> Flow | None:
    """Everything the flow page shows of `job_id`'s flow; None when the job does not exist."""
    found = walk(reader, job_id)
    if found is None:
        return None
    ids = [n["id"] for n in found.nodes]
    held = reader.all(CQ.console_flow_held, ids=ids, limit=MAX_NODES * 2)
    counts = dict.fromkeys(JOB_STATUSES, 0)
    for node in found.nodes:
        counts[node["status"]] = counts.get(node["status"], 0) + 1
    return Flow(found, counts, held[:HELD_SHOWN], len(held),
                layout(found, {r["id"] for r in held}),
                sorted({n["type"] for n in found.nodes}))


def depths(nodes: list[Row], edges: list[Row]) -> dict[int, int]:
    """Each job's depth: 0 without a parent in the flow, else one more than its deepest
    parent's (longest path, Kahn's order). Jobs on a cycle (none can be enqueued; one
    written by hand) get one more than the deepest parent placed before them."""
    parents: dict[int, list[int]] = defaultdict(list)
    children: dict[int, list[int]] = defaultdict(list)
    for e in edges:
        parents[e["job_id"]].append(e["parent_id"])
        children[e["parent_id"]].append(e["job_id"])
    waiting = {n["id"]: len(parents[n["id"]]) for n in nodes}
    depth = {i: 0 for i, n in waiting.items() if n == 0}
    ready = deque(sorted(depth))
    while ready:
        job = ready.popleft()
        for child in children[job]:
            depth[child] = max(depth.get(child, 0), depth[job] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    for job in sorted(i for i in waiting if i not in depth):  # on a cycle
        depth[job] = 1 + max((depth[p] for p in parents[job] if p in depth), default=-1)
    return depth


def layout(found: Walk, held: set[int]) -> Graph:
    """The boxes and edges the page draws: one box a job for a small flow, else one box a
    (layer, type, status), at most MAX_ROW a layer (the smallest groups beyond it share
    an "other" box) and MAX_LAYERS layers (depths share a layer when deeper)."""
    depth = depths(found.nodes, found.edges)
    deepest = max(depth.values(), default=0)
    per_layer = -(-(deepest + 1) // MAX_LAYERS)  # ceil: depths per drawn layer
    grouped = len(found.nodes) > INDIVIDUAL_MAX
    boxes: dict[tuple[Any, ...], Box] = {}
    box_of: dict[int, tuple[Any, ...]] = {}
    for node in found.nodes:
        layer = depth[node["id"]] // per_layer
        key: tuple[Any, ...] = ((layer, node["type"], node["status"]) if grouped
                                else (layer, node["id"]))
        box = boxes.get(key)
        if box is None:
            lo = layer * per_layer
            box = boxes[key] = Box(key, layer, node["type"], node["status"],
                                   first_id=node["id"], depths=(lo, lo + per_layer - 1))
        box.jobs += 1
        box.first_id = min(box.first_id or node["id"], node["id"])
        box.held += node["id"] in held
        box_of[node["id"]] = key
    for box in boxes.values():
        if box.jobs == 1:
            box.job_id = box.first_id
    layers: dict[int, list[Box]] = defaultdict(list)
    for box in boxes.values():
        layers[box.layer].append(box)
    drawn: list[list[Box]] = []
    moved: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # a group's key -> its "other" box's
    for layer in sorted(layers):
        row = sorted(layers[layer], key=lambda b: (-b.jobs, b.type, b.status, b.first_id or 0))
        if len(row) > MAX_ROW:
            kept, rest = row[:MAX_ROW - 1], row[MAX_ROW - 1:]
            other = Box((layer, "other"), layer, f"{len(rest)} more groups", "mixed",
                        jobs=sum(b.jobs for b in rest), held=sum(b.held for b in rest),
                        first_id=min(b.first_id or 0 for b in rest), depths=rest[0].depths)
            moved.update((b.key, other.key) for b in rest)
            boxes[other.key] = other
            row = [*kept, other]
        drawn.append(sorted(row, key=lambda b: (b.type, b.status, b.first_id or 0)))
    links: Counter[tuple[tuple[Any, ...], tuple[Any, ...]]] = Counter()
    for e in found.edges:
        parent, child = box_of[e["parent_id"]], box_of[e["job_id"]]
        links[(moved.get(parent, parent), moved.get(child, child))] += 1
    edges = [(boxes[a], boxes[b], n) for (a, b), n in sorted(links.items(), key=str) if a != b]
    return Graph(drawn, edges, grouped, per_layer)


def dependents_preview(reader: Reader, action: str, from_statuses: list[str], *,
                       job_ids: list[int] | None = None,
                       selection_id: str | None = None) -> dict[str, int] | None:
    """How many waiting jobs each `dependents=` choice of a cancel or skip would
    touch (console_dependents_preview), for `job_ids` or a stored selection; None when
    the action is no cancel or skip, or no waiting job depends on what it acts on (the
    form then offers no choice)."""
    if action not in TAKES_DEPENDENTS:
        return None
    row = reader.row(CQ.console_dependents_preview, job_ids=job_ids or [],
                     selection_id=selection_id, from_statuses=from_statuses)
    if not row["released"]:
        return None
    return {"hold": row["held"], "cancel": row["cancelled"], "release": row["released"],
            "start": row["start"]}
