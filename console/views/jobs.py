"""Jobs list (filters, keyset pages) and job detail (live while the job is not terminal)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import TRACE_ID, settings
from jobwarden.console.data import flows, suggest
from jobwarden.console.data.database import CQ
from jobwarden.console.data.queries import JobFilter, Page, jobs_page
from jobwarden.console.web.forms import ActionForm
from jobwarden.console.web.reads import page_reads, primary_page
from jobwarden.console.web.security import is_htmx
from jobwarden.worker.core import tracing
from jobwarden.worker.ops.operations import (
    SELECTION_FROM,
    TAKES_DEPENDENTS,
    allowed_actions,
)
from jobwarden.worker.store.schema import JOB_STATUSES, TERMINAL_STATUSES

bp = Blueprint("jobs", __name__)


@bp.get("/jobs")
def index() -> ResponseReturnValue:
    """Jobs matching the filters, newest first."""
    cfg = settings()
    flt = JobFilter.from_args(request.args, cfg["PAGE_SIZE"], cfg["PAGE_SIZE_MAX"])
    problem = flt.hidden
    if problem:  # refused before any SQL runs: the same answer for every guess
        page = Page([], None)
    else:
        with page_reads().reading() as reader:
            page = jobs_page(reader, flt)
    fragment = is_htmx()  # the rows alone, polled: no filter boxes to suggest for
    template = "jobwarden/_job_rows.html" if fragment else "jobwarden/jobs.html"
    suggestions = (suggest.NONE if fragment
                   else suggest.read(page_reads(), suggest.filters) or suggest.NONE)
    return render_template(template, page=page, flt=flt, statuses=JOB_STATUSES,
                           problem=problem, max_nodes=flows.MAX_NODES,
                           suggestions=suggestions,
                           page_link=lambda before, after=None: url_for(
                               "jobwarden.jobs.index") + "?"
                           + flt.query_string(before=before, after=after)), \
        400 if problem else 200


def job_context(job_id: int) -> dict[str, Any]:
    # The primary: its action forms carry the status read here, and a page opened after
    # an action shows it.
    with primary_page().reading() as reader:
        job = reader.one(CQ.console_job_get, job_id=job_id)
        if job is None:
            abort(404)
        executions = reader.all(CQ.console_job_executions, job_id=job_id)
        logs = {r["execution_id"]: r for r in reader.all(
            CQ.console_job_execution_logs,
            execution_ids=[e["execution_id"] for e in executions])}
        audit = reader.all(CQ.console_job_audit, job_id=job_id)
        flow = reader.all(CQ.console_job_flow, job_id=job_id)
    terminal = job["status"] in TERMINAL_STATUSES
    trace = tracing.trace_id(job.get("trace_context"))
    template = settings().get("TRACE_URL")
    return {
        "job": job, "executions": executions, "audit": audit,
        # The trace it was enqueued in, and a link to it when a viewer is configured.
        "trace_id": trace,
        "trace_url": template.replace(TRACE_ID, trace) if trace and template else None,
        # each attempt's log lines, by execution id (attempts that logged nothing: none)
        "logs": logs,
        "parents": [r for r in flow if r["role"] == "parent"],
        "dependents": [r for r in flow if r["role"] == "dependent"],
        # unknown waits for an operator: still worth watching, but nothing moves by itself
        "live": not terminal and job["status"] != "unknown",
        "poll_seconds": settings()["JOB_POLL_SECONDS"],
        "actions": allowed_actions(job["status"], job["cancel_requested_at"] is not None),
    }


@bp.get("/jobs/<int:job_id>")
def detail(job_id: int) -> ResponseReturnValue:
    """Everything about one job: state, payload, attempts timeline, audit trail."""
    context = job_context(job_id)
    forms = {a: ActionForm.fresh(context["job"]["status"], retried_at=context["job"]["retried_at"])
             for a in context["actions"]}
    # A cancel or skip decides what becomes of the jobs waiting for this one: the form
    # offers the choice, with what each would touch, when some wait.
    previews = {}
    if context["job"]["dependents"]:
        with primary_page().reading() as reader:
            # The statuses a cancel moves to cancelled are a selection's: a running
            # job's cancel is a request, and its dependents stay held when it ends.
            previews = {a: p for a in TAKES_DEPENDENTS if a in forms and (
                p := flows.dependents_preview(reader, a, list(SELECTION_FROM[a]),
                                              job_ids=[job_id]))}
    # A pending job waiting for a later time can be run now or moved (audited).
    schedule_form = ActionForm.fresh("pending") if context["job"]["status"] == "pending" else None
    return render_template("jobwarden/job.html", forms=forms, schedule_form=schedule_form,
                           previews=previews, **context)


@bp.get("/jobs/<int:job_id>/_live")
def live(job_id: int) -> ResponseReturnValue:
    """The job's changing part; it stops polling once the job is terminal."""
    context = job_context(job_id)
    return render_template("jobwarden/_job_live.html", **context)
