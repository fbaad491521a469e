"""Operator actions on one job: retry, cancel, skip, and reconcile of unknown outcomes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, abort, flash, g, redirect, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.data.database import get_db
from jobwarden.console.web.auth import role_required
from jobwarden.console.web.forms import (
    DEPENDENTS_PROBLEM,
    ActionForm,
    dependents_choice,
    given,
)
from jobwarden.console.web.identity import signed_in
from jobwarden.console.web.security import safe_next_url
from jobwarden.worker.ops import operations

bp = Blueprint("actions", __name__)
#: Actions that may start from more than one status are told which one the operator saw,
#: so that a job that moved on meanwhile is refused rather than acted on.
EXPECTS_STATUS = frozenset(a for a, froms in operations.ALLOWED_FROM.items() if len(froms) > 1)


@bp.post("/jobs/<int:job_id>/<action>")
@role_required("operator")
def job_action(job_id: int, action: str) -> ResponseReturnValue:
    """Apply `action` to a job with the operator's reason; answer with a 303 and a message."""
    act = operations.JOB_ACTIONS.get(action)
    if act is None:
        abort(404)
    back = safe_next_url(request.form.get("next"), url_for("jobwarden.jobs.detail", job_id=job_id))
    form = ActionForm()
    if not form.validate():
        flash(_form_problem(form), "error")
        return redirect(back, code=303)
    user = signed_in()
    # Any: the actions differ in their keywords (only some take expected_status).
    kwargs: dict[str, Any] = {"actor": user.actor, "role": user.role,
                              "reason": given(form.reason), "request_id": form.request_id.data}
    if action in EXPECTS_STATUS:
        kwargs["expected_status"] = form.expected_status.data or None
    try:
        kwargs["seen_retried_at"] = form.seen_retried()
    except ValueError:
        flash("The form's record of the job's last retry is not a time. Nothing was "
              "changed: open the job again.", "error")
        return redirect(back, code=303)
    if action in operations.TAKES_DEPENDENTS:
        choice = dependents_choice(request.form)
        if choice is None:
            flash(DEPENDENTS_PROBLEM, "error")
            return redirect(back, code=303)
        kwargs["dependents"] = choice
    with get_db().transaction() as tx:
        result = act(tx.conn, job_id, **kwargs)
    flash(result.message, "ok" if result.ok else "error")
    g.action_result = result
    return redirect(back, code=303)


@bp.post("/jobs/<int:job_id>/schedule")
@role_required("operator")
def schedule(job_id: int) -> ResponseReturnValue:
    """Run a pending job now, or move it to the operator's time (its offset if it gives
    one, else UTC: the zone the console shows times in); audited."""
    back = url_for("jobwarden.jobs.detail", job_id=job_id)
    form = ActionForm()
    if not form.validate():
        flash(_form_problem(form), "error")
        return redirect(back, code=303)
    run_at = None
    if request.form.get("when") == "at":
        try:
            run_at = datetime.fromisoformat(request.form.get("run_at", "").strip())
        except ValueError:
            flash("Give the new time as YYYY-MM-DDTHH:MM (UTC), or with an offset "
                  "(YYYY-MM-DDTHH:MM+05:00). Nothing was changed.", "error")
            return redirect(back, code=303)
        if run_at.utcoffset() is None:
            run_at = run_at.replace(tzinfo=UTC)
    user = signed_in()
    with get_db().transaction() as tx:
        result = operations.reschedule_job(
            tx.conn, job_id, actor=user.actor, role=user.role,
            reason=given(form.reason), run_at=run_at, request_id=form.request_id.data)
    flash(result.message, "ok" if result.ok else "error")
    return redirect(back, code=303)


def _form_problem(form: ActionForm) -> str:
    if form.reason.errors:
        return "A reason is required (up to 500 characters). Nothing was changed."
    return "The form was incomplete. Reload the page and try again. Nothing was changed."
