"""SLA panels: per job type, target vs. oldest pending, wait and duration percentiles."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data import sla as sla_model
from jobwarden.console.web import charts
from jobwarden.console.web.reads import page_reads
from jobwarden.console.web.security import is_htmx

bp = Blueprint("sla", __name__)


@bp.get("/sla")
def index() -> ResponseReturnValue:
    """The SLA panel of every job type over the last hour."""
    cfg = settings()
    with page_reads().reading() as reader:
        rows = sla_model.sla_rows(reader, cfg["SLA_TARGETS"], cfg["SLA_DEFAULT_SECONDS"])
    template = "jobwarden/_sla_panels.html" if is_htmx() else "jobwarden/sla.html"
    return render_template(template, rows=rows,
                           sla_charts={r.type: charts.sla_chart(r) for r in rows})
