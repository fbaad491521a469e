"""Overview: counts by status, queue and type; pending age; rates; stale and lost work."""

from __future__ import annotations

from flask import Blueprint, abort, render_template

from console import queries
from console.database import get_db
from console.mount import settings
from worker import operations

bp = Blueprint("overview", __name__)
PANELS = ("counts", "health")


def _panel_context(panel: str) -> dict:
    cfg = settings()
    with get_db().reading() as reader:
        if panel == "counts":
            controls = operations.queue_controls(reader.conn)
            return {"ov": queries.overview(reader),
                    "paused": [q for q, c in controls.items() if c["paused"]]}
        workers = queries.workers_with_jobs(reader, cfg["WORKER_GONE_SECONDS"])
        return {
            "stale": reader.all("console_stale_running",
                                stale_s=cfg["STALE_HEARTBEAT_SECONDS"], limit=20),
            "recovered": reader.all("console_recovered_recent", limit=20),
            "workers": [w for w in workers if w["state"] in ("running", "draining")],
            "stale_after": cfg["STALE_HEARTBEAT_SECONDS"],
        }


@bp.get("/")
def index():
    """The overview page: every panel, each refreshing itself."""
    context = {f"{p}_ctx": _panel_context(p) for p in PANELS}
    return render_template("jobwarden/overview.html", **context)


@bp.get("/_overview/<panel>")
def panel(panel: str):
    """One overview panel (htmx polls it)."""
    if panel not in PANELS:
        abort(404)
    return render_template(f"jobwarden/_overview_{panel}.html", **_panel_context(panel))
