"""Schedules: each periodic job type's next run, last run and its outcome, paused or not;
pause, resume and run now (audited)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.data.database import CQ, get_db
from jobwarden.console.web.auth import role_required
from jobwarden.console.web.forms import ActionForm, given
from jobwarden.console.web.identity import current_user, signed_in
from jobwarden.console.web.reads import page_reads
from jobwarden.worker.jobs import cron
from jobwarden.worker.jobs.registry import NAME_PATTERN
from jobwarden.worker.ops import operations

bp = Blueprint("schedules", __name__)


@bp.get("/schedules")
def index() -> ResponseReturnValue:
    """Every published schedule with its next tick and its last job's status; one this
    console cannot read is shown broken, with why."""
    with page_reads().reading() as reader:
        rows = [{**row, "problem": cron.schedule_problem(row["type"], row["cron"],
                                                              row["timezone"])}
                for row in reader.all(CQ.schedules_list)]
    forms, run_forms = {}, {}
    if current_user.has_role("operator"):
        forms = {row["type"]: ActionForm.fresh() for row in rows}
        run_forms = {row["type"]: ActionForm.fresh() for row in rows}
    return render_template("jobwarden/schedules.html", schedules=rows, forms=forms,
                           run_forms=run_forms)


@bp.post("/schedules/<job_type>/<action>")
@role_required("operator")
def schedule_action(job_type: str, action: str) -> ResponseReturnValue:
    """Pause, resume or run now a schedule with the operator's reason (audited); 303 back."""
    user = signed_in()
    act = operations.SCHEDULE_ACTIONS.get(action)
    if act is None or not NAME_PATTERN.match(job_type):
        abort(404)
    form = ActionForm()
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
        return redirect(url_for("jobwarden.schedules.index"), code=303)
    with get_db().transaction() as tx:
        result = act(tx.conn, job_type, actor=user.actor, role=user.role,
                     reason=given(form.reason), request_id=form.request_id.data)
    flash(result.message, "ok" if result.ok else "error")
    return redirect(url_for("jobwarden.schedules.index"), code=303)
