"""Which workers are live and which queues they serve: one answer for the overview's Live
workers panel, the Alerts panel and /metrics (the Prometheus rule reads the gauge).

Live means claiming work now: state `running` with a fresh heartbeat (the workers query
turns a worker whose heartbeat is older than WORKER_GONE_SECONDS into `gone`). A
`draining` worker finishes the jobs it holds and claims no new ones, so it serves no
queue's waiting jobs; the panel shows it apart. A worker started without queues, or
with a `*` lane (`--queues email=4,*`), publishes `*` and serves every queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ALL_QUEUES = "*"
#: A row of the workers query (console/data/sql): state, queues, heartbeat...
Worker = Mapping[str, Any]


def is_live(worker: Worker) -> bool:
    return bool(worker["state"] == "running")


def live(workers: Iterable[Worker]) -> list[Worker]:
    return [w for w in workers if is_live(w)]


def serves(worker: Worker, queue: str) -> bool:
    return ALL_QUEUES in worker["queues"] or queue in worker["queues"]


def live_count(workers: Iterable[Worker], queue: str) -> int:
    """Live workers that claim from `queue`."""
    return sum(1 for w in workers if is_live(w) and serves(w, queue))
