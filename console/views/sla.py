"""SLA panels: per job type, target vs. oldest pending, wait and duration percentiles."""

from __future__ import annotations

from flask import Blueprint, current_app, render_template

from console import sla as sla_model
from console.database import get_db
from console.security import is_htmx

bp = Blueprint("sla", __name__)


@bp.get("/sla")
def index():
    """The SLA panel of every job type over the last hour."""
    cfg = current_app.config
    with get_db().reading() as reader:
        rows = sla_model.sla_rows(reader, cfg["SLA_TARGETS"], cfg["SLA_DEFAULT_SECONDS"])
    template = "_sla_panels.html" if is_htmx() else "sla.html"
    return render_template(template, rows=rows, chart_w=sla_model.CHART_W,
                           chart_h=sla_model.CHART_H, target_line_y=sla_model.target_line_y)
