"""Overview: counts by status, queue and type; trends; SLA breaches; stale and lost work."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from flask import Blueprint, abort, current_app, render_template, request
from flask.typing import ResponseReturnValue

from jobwarden.console.core import live_workers
from jobwarden.console.core.config import settings
from jobwarden.console.data import queries, trends
from jobwarden.console.data import sla as sla_model
from jobwarden.console.data.database import CQ
from jobwarden.console.web import charts
from jobwarden.console.web.errors import page as error_page
from jobwarden.console.web.reads import page_reads
from jobwarden.worker.ops import operations
from jobwarden.worker.store.schema import JOB_STATUSES

bp = Blueprint("overview", __name__)
PANELS = ("counts", "trends", "health")


def _trend_filters() -> tuple[str | None, str | None, str | None]:
    """The trend chart's queue and type filters, and why they cannot be answered (a name
    the pages show as [REDACTED]: choosing it would tell whether a guess is right)."""
    queue = queries.text_filter(request.args.get("queue"))
    job_type = queries.text_filter(request.args.get("type"))
    return queue, job_type, (queries.not_shown("queue", queue)
                             or queries.not_shown("type", job_type))


def _refused() -> ResponseReturnValue | None:
    """The same 400 for a right and a wrong guess at a redacted name, before any SQL."""
    problem = _trend_filters()[2]
    return error_page(400, "Not shown", f"{problem} Nothing was read.") if problem else None


def _panel_context(panel: str) -> dict[str, Any]:
    cfg = settings()
    with page_reads().reading() as reader:
        if panel == "counts":
            controls = operations.queue_controls(reader.conn)
            # Every status in worker/core/states.py's order (live first, then terminal, then
            # unknown), so a status added there gets its tile and columns here too.
            return {"ov": queries.overview(reader), "statuses": JOB_STATUSES,
                    # Waiting jobs a parent that failed, was cancelled or skipped, or ended
                    # unknown holds: the waiting tile says how many of its jobs wait in vain.
                    "held": reader.row(CQ.console_held_waiting)["held"],
                    "paused": [q for q, c in controls.items() if c["paused"]],
                    "breaches": sla_model.pending_breaches(
                        reader, cfg["SLA_TARGETS"], cfg["SLA_DEFAULT_SECONDS"])}
        if panel == "trends":
            queue, job_type, _ = _trend_filters()
            counted = reader.all(CQ.console_counts_by_queue_type)
            trend = trends.trend(reader, request.args.get("range", "1h"), queue, job_type)
            return {"trend": trend, "trend_chart": charts.trend_chart(trend),
                    "outcomes": trends.OUTCOMES, "recent_minutes": trends.RECENT_MINUTES,
                    "queues": sorted({r["queue"] for r in counted}),
                    "types": sorted({r["type"] for r in counted})}
        workers = queries.workers_with_jobs(reader, cfg["WORKER_GONE_SECONDS"])
        return {
            "stale": reader.all(CQ.console_stale_running,
                                stale_s=cfg["STALE_HEARTBEAT_SECONDS"], limit=20),
            "recovered": reader.all(CQ.console_recovered_recent, limit=20),
            "workers": live_workers.live(workers),
            "draining": [w for w in workers if w["state"] == "draining"],
            "stale_after": cfg["STALE_HEARTBEAT_SECONDS"],
        }


@bp.get("/")
def index() -> ResponseReturnValue:
    """The overview page: every panel, each refreshing itself."""
    if refused := _refused():
        return refused
    context = {f"{p}_ctx": _panel_context(p) for p in PANELS}
    return render_template("jobwarden/overview.html", **context)


@bp.get("/_overview/<panel>")
def panel(panel: str) -> ResponseReturnValue:
    """One overview panel (htmx polls it)."""
    if panel not in PANELS:
        abort(404)
    if panel == "trends" and (refused := _refused()):
        return refused
    return render_template(f"jobwarden/_overview_{panel}.html", **_panel_context(panel))


@bp.get("/_nav/badges")
def nav_counts() -> ResponseReturnValue:
    """The navigation's badges alone (base.html polls it as often as the overview's
    tiles), so a page left open never shows counts older than that."""
    return render_template("jobwarden/_nav_badges.html")


#: How long the navigation's SLA badge is reused: finding each type's oldest runnable job
#: costs ~40 ms at 10 million jobs, too much to repeat on every page a user opens.
SLA_BADGE_SECONDS = 10.0


def install(parent: Blueprint) -> None:
    """The navigation's counts on the console's own pages only: an app-wide context
    processor would hand every page of a host app (jobwarden.console.mount) the console's badge
    queries, against a database the host may not even have the console's tables in."""
    parent.context_processor(nav_badges)


def nav_badges() -> dict[str, Callable[[], dict[str, int]]]:
    """Counts for the navigation (Failed, Needs review, SLA) on every signed-in page.

    Read lazily: only a template that renders the navigation calls it. Failed and Needs
    review come from the rollup (a few hundred rows); the SLA breach count is reused for
    SLA_BADGE_SECONDS per app (the SLA page and the overview always compute it afresh).
    """
    def badges() -> dict[str, int]:
        cfg = settings()
        cache = current_app.extensions.setdefault("jobwarden_sla_badge", {})
        with page_reads().reading() as reader:
            totals = {r["status"]: r["jobs"] for r in reader.all(CQ.console_status_totals)}
            at, breaching = cache.get("value", (-1e9, 0))
            if time.monotonic() - at > cfg.get("SLA_BADGE_SECONDS", SLA_BADGE_SECONDS):
                breaching = len(sla_model.pending_breaches(
                    reader, cfg["SLA_TARGETS"], cfg["SLA_DEFAULT_SECONDS"]))
                cache["value"] = (time.monotonic(), breaching)
        # Keyed by the areas' badge keys (console/views/__init__.py, AREAS).
        return {"failed": totals.get("failed", 0), "review": totals.get("unknown", 0),
                "sla": breaching}
    return {"nav_badges": badges}
