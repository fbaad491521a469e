"""The flow page: the jobs connected to one job by dependency edges, drawn as a graph,
counted by status, and what holds its waiting jobs (console/data/flows.py).

A flow is named by any of its jobs' ids. A batch's page (console/views/batches.py) draws
no member: it shows the batch's own counts, whatever their number.
"""

from __future__ import annotations

from flask import Blueprint, abort, render_template, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.data import flows
from jobwarden.console.data.queries import positive_int
from jobwarden.console.web.errors import page
from jobwarden.console.web.flowchart import flow_chart
from jobwarden.console.web.reads import page_reads
from jobwarden.worker.store.schema import JOB_STATUSES

bp = Blueprint("flows", __name__)


def flow_id(value: str) -> int | None:
    """A flow's id from the URL: a job id (1 to 2**63 - 1), else None."""
    return positive_int(value) if value.isascii() and value.isdigit() else None


@bp.get("/flows/<value>")
def detail(value: str) -> ResponseReturnValue:
    """The flow of job `value`: its graph, its counts by status and what holds it."""
    job_id = flow_id(value)
    if job_id is None:
        return page(400, "Not a job id", f"A flow is named by the id of one of its jobs (a whole "
                    f"number from 1 to {2**63 - 1}), not {value[:30]!r}.")
    with page_reads().reading() as reader:
        flow = flows.read(reader, job_id)
    if flow is None:
        abort(404)

    def link(box: flows.Box) -> str:
        if box.job_id is not None:
            return url_for("jobwarden.jobs.detail", job_id=box.job_id)
        if box.status == "mixed":
            return url_for("jobwarden.jobs.index", flow=job_id)
        return url_for("jobwarden.jobs.index", flow=job_id, type=box.type, status=box.status)

    return render_template("jobwarden/flow.html", flow=flow, job_id=job_id,
                           statuses=JOB_STATUSES, max_nodes=flows.MAX_NODES,
                           chart=flow_chart(flow.graph, link, len(flow.walk.nodes)))
