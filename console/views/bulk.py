"""Select and act: tick jobs (or all matching a filter), review the set, act with a reason.

The reviewed set is stored server-side (`console_selections`) when the operator asks to
review it; the confirming form carries only the selection's id and the reason. So what
the action touches is exactly what the review showed (minus jobs that moved on), never
what a stale or edited form says.
"""

from __future__ import annotations

import uuid

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from console.data.database import CQ, get_db
from console.data.queries import JobFilter, positive_int
from console.data.schema import SELECTION_ACTIONS
from console.web.auth import role_required
from console.web.errors import page
from console.web.forms import ActionForm
from console.web.identity import current_user
from console.web.security import safe_next_url
from worker.ops import operations
from worker.store.schema import JOB_STATUSES

bp = Blueprint("bulk", __name__)

#: What a jobs list offers to do with ticked jobs: the selection actions that apply beyond
#: unknown outcomes (those are decided on Needs review).
LIST_ACTIONS = tuple(a for a, froms in operations.SELECTION_FROM.items()
                     if set(froms) - {"unknown"})
#: The most jobs one selection may hold; "all matching" beyond it asks for a narrower filter.
SELECTION_MAX = 10_000


@bp.post("/bulk/select")
@role_required("operator")
def select():
    """Turn ticked ids, or every job matching the filter, into a stored selection."""
    action = request.form.get("action", "")
    back = safe_next_url(request.form.get("next"), url_for("jobwarden.jobs.index"))
    if action not in SELECTION_ACTIONS:
        flash(f"Choose {', '.join(a.replace('_', ' ') for a in SELECTION_ACTIONS)}. "
              "Nothing was changed.", "error")
        return redirect(back, code=303)
    if request.form.get("all_matching"):
        status = request.form.get("status") or ""
        if status and status not in JOB_STATUSES:
            # JobFilter drops an unknown status (a list page shows every job): here that
            # would widen the selection to every status, so refuse instead.
            return page(400, "Unknown status", f"Unknown status {status!r}: choose one of "
                        f"{', '.join(JOB_STATUSES)}. Nothing was selected.")
        flt = JobFilter.from_args({**request.form.to_dict(), "before": None, "after": None})
        found = get_db().all(CQ.console_jobs_page, **{**flt.params(), "limit": SELECTION_MAX + 1})
        if len(found) > SELECTION_MAX:
            flash(f"More than {SELECTION_MAX:,} jobs match this filter: narrow it first. "
                  "Nothing was changed.", "error")
            return redirect(back, code=303)
        job_ids = [r["id"] for r in found]
        description = "all jobs matching " + (_describe(flt) or "no filter")
    else:
        ids = {positive_int(v) for v in request.form.getlist("job_id")}
        job_ids = sorted((i for i in ids if i), reverse=True)[:SELECTION_MAX]
        description = f"{len(job_ids)} ticked job(s)"
    if not job_ids:
        flash("No jobs selected. Nothing was changed.", "error")
        return redirect(back, code=303)
    selection_id = str(uuid.uuid4())
    with get_db().transaction() as tx:
        tx.all(CQ.console_selection_create, id=selection_id, actor=current_user.actor,
               action=action, job_ids=job_ids, description=description)
    return redirect(url_for("jobwarden.bulk.review", selection_id=selection_id, next=back),
                    code=303)


def _selection_id(value: str) -> str:
    """The selection id from the URL; anything that is not a UUID is a 404 (after the
    sign-in check, so the URL reveals nothing to a visitor)."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        abort(404)


@bp.get("/bulk/<selection_id>")
@role_required("operator")
def review(selection_id):
    """The stored set: how many, how they stand now, and the reason box to act."""
    selection_id = _selection_id(selection_id)
    with get_db().reading() as reader:
        sel = reader.one(CQ.console_selection_get, id=str(selection_id),
                         actor=current_user.actor)
        if sel is None:
            abort(404)
        statuses = reader.all(CQ.console_selection_statuses, job_ids=sel["job_ids"])
    eligible = sum(s["jobs"] for s in statuses
                   if s["status"] in operations.SELECTION_FROM[sel["action"]])
    return render_template(
        "jobwarden/bulk.html", sel=sel, past=operations.SELECTION_PAST, statuses=statuses,
        eligible=eligible,
        allowed_from=operations.SELECTION_FROM[sel["action"]], form=ActionForm.fresh(),
        sample=sel["job_ids"][:50],
        next=safe_next_url(request.args.get("next"), url_for("jobwarden.jobs.index")))


@bp.post("/bulk/<selection_id>")
@role_required("operator")
def apply(selection_id):
    """Act on exactly the stored set, once, with the operator's reason."""
    selection_id = _selection_id(selection_id)
    form = ActionForm()
    back = url_for("jobwarden.bulk.review", selection_id=selection_id)
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
        return redirect(back, code=303)
    with get_db().transaction() as tx:
        held = tx.all(CQ.console_selection_get, id=str(selection_id), actor=current_user.actor)
        used = tx.all(CQ.console_selection_consume, id=str(selection_id),
                      actor=current_user.actor)
        if not used:
            done = held and operations.already_done(tx.conn, held[0]["action"],
                                                    form.request_id.data,
                                                    current_user.actor, str(selection_id))
            message = done.message if done else (
                "This selection was already used or has expired: select again. "
                "Nothing was changed.")
            flash(message, "ok" if done else "error")
            return redirect(url_for("jobwarden.jobs.index"), code=303)
        result = operations.act_on_selection(
            tx.conn, used[0]["action"], used[0]["job_ids"], actor=current_user.actor,
            role=current_user.role, reason=form.reason.data, bulk_id=str(selection_id),
            request_id=form.request_id.data)
    flash(result.message, "ok" if result.ok else "error")
    return redirect(url_for("jobwarden.audit.index", bulk=str(selection_id)) if result.ok else back,
                    code=303)


def _describe(flt: JobFilter) -> str:
    parts = [f"{k}={v}" for k, v in (("status", flt.status), ("queue", flt.queue),
                                     ("type", flt.type), ("error code", flt.error_code),
                                     ("search", flt.q)) if v]
    return ", ".join(parts)
