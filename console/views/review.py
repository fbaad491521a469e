"""Needs review: jobs whose outcome is unknown, with their reconcile actions.

Each card shows the job's payload (redacted) and ambiguous error, and one reason box for
its four decisions; ticked cards can be decided together through the bulk review
(console/views/bulk.py).
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data.database import CQ, get_db
from jobwarden.console.data.queries import clamp_limit, positive_int
from jobwarden.console.web.auth import role_required
from jobwarden.console.web.forms import ActionForm, given
from jobwarden.console.web.identity import current_user, signed_in
from jobwarden.console.web.reads import page_reads
from jobwarden.worker.jobs.enqueue import enqueue
from jobwarden.worker.ops.operations import ALLOWED_FROM
from jobwarden.worker.ops.reconcile import RECONCILE_TYPE

bp = Blueprint("review", __name__)
#: What an operator can decide about an ambiguous outcome: the actions allowed from
#: unknown, the two verdicts (mark_completed, mark_failed) first.
RECONCILE = tuple(sorted((a for a, froms in ALLOWED_FROM.items() if "unknown" in froms),
                         key=lambda a: not a.startswith("mark_")))


@bp.get("/review")
def index() -> ResponseReturnValue:
    """Unknown-outcome jobs, newest first, each with its reconcile forms."""
    cfg = settings()
    limit = clamp_limit(request.args.get("limit"), cfg["PAGE_SIZE"], cfg["PAGE_SIZE_MAX"])
    rows = page_reads().all(CQ.console_unknown_jobs,
                            before_id=positive_int(request.args.get("before")),
                            limit=limit + 1)
    next_before = rows[limit - 1]["id"] if len(rows) > limit else None
    rows = rows[:limit]
    actions = list(RECONCILE)
    forms = {}
    run_form = None
    if current_user.can_act:
        # One reason box per job, for its four decisions (each button posts to its action).
        forms = {job["id"]: ActionForm.fresh("unknown") for job in rows}
        run_form = ActionForm.fresh("unknown")
    return render_template("jobwarden/review.html", jobs=rows, actions=actions, forms=forms,
                           next_before=next_before, limit=limit, run_form=run_form)


@bp.post("/review/reconcile")
@role_required("operator")
def run_reconcilers() -> ResponseReturnValue:
    """Ask a worker to run the job types' reconcilers: the console imports no application
    code, so it enqueues a `jobwarden.reconcile` job; each decision is audited as yours."""
    user = signed_in()
    form = ActionForm()
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
        return redirect(url_for("jobwarden.review.index"), code=303)
    with get_db().transaction() as tx:
        job_id = enqueue(tx.conn, RECONCILE_TYPE,
                         {"actor": user.actor, "role": user.role,
                          "reason": given(form.reason)},
                         idempotency_key="reconcile:console")
    flash(f"Reconcilers requested (job #{job_id}): a worker with the handlers runs them; "
          "settled jobs leave this page.", "ok")
    return redirect(url_for("jobwarden.review.index"), code=303)
