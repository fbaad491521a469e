"""The overview's Alerts panel (firing / ok), the Prometheus rules' conditions read now."""

from __future__ import annotations

from flask import Blueprint, render_template

from console import alerts
from console.core.config import settings
from console.data.database import CQ, get_db
from console.views.metrics import Recent

bp = Blueprint("alerts", __name__)


def read_alerts() -> list[alerts.Alert]:
    cfg = settings()
    with get_db().reading() as reader:
        recent = Recent.read(reader, stale_s=cfg["STALE_HEARTBEAT_SECONDS"],
                             sla_configured=cfg["SLA_TARGETS"])
        workers = reader.all(CQ.console_workers_list, gone_s=cfg["WORKER_GONE_SECONDS"],
                             limit=1000)
        flow = reader.all(CQ.alerts_queue_flow)
        completions = reader.one(CQ.alerts_completions_usual) or {}
    return alerts.evaluate(recent, workers, flow, completions)


@bp.get("/_overview/alerts")
def panel():
    """The Alerts panel alone, for its own polling."""
    return render_template("jobwarden/_alerts.html", alerts=read_alerts())
