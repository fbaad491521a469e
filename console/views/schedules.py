"""Schedules: each periodic job type's next run, last run and its outcome, paused or not;
pause, resume and run now (operators, audited); add, edit and remove a console edit
(admins, audited, revision-checked: worker/ops/schedule_edits.py), with a preview of the
next ticks in the schedule's zone.

Where a schedule comes from is shown on each row: declared in code, edited in the console
(winning over the code's declaration until removed), or added in the console. Viewers
and operators see the page without the edit forms; their POSTs to them get a 403.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.data.database import CQ, get_db
from jobwarden.console.data.queries import bigint_digits, not_shown
from jobwarden.console.web.auth import role_required
from jobwarden.console.web.errors import page as error_page
from jobwarden.console.web.forms import ActionForm, ScheduleForm, given
from jobwarden.console.web.identity import current_user, signed_in
from jobwarden.console.web.reads import page_reads
from jobwarden.worker.jobs import cron
from jobwarden.worker.jobs.registry import NAME_PATTERN
from jobwarden.worker.ops import operations, schedule_edits
from jobwarden.worker.ops.operations import ActionResult
from jobwarden.worker.ops.schedule_edits import ScheduleEdit

bp = Blueprint("schedules", __name__)


def _source(row: dict[str, Any]) -> str:
    """Where the schedule the workers run comes from: `code`, `override` (a console edit
    of a schedule declared in code) or `console` (declared nowhere else)."""
    if row["edited_by"] is None:
        return "code"
    return "override" if row["declared"] is not None else "console"


@bp.get("/schedules")
def index() -> ResponseReturnValue:
    """Every published schedule with its next tick and its last job's status; one this
    console cannot read is shown broken, with why. Each readable one with its next ticks."""
    with page_reads().reading() as reader:
        rows = reader.all(CQ.schedules_list)
        addable = ([r["type"] for r in reader.all(CQ.schedule_addable_types)]
                   if current_user.has_role("admin") else [])
        now = reader.row(CQ.db_now)["now"]
    schedules = []
    for row in rows:
        problem = cron.schedule_problem(row["type"], row["cron"], row["timezone"])
        schedules.append({**row, "problem": problem, "source": _source(row),
                          "preview": [] if problem else _preview(row["cron"], row["timezone"],
                                                                 now)})
    forms, run_forms, edit_forms = {}, {}, {}
    if current_user.has_role("operator"):
        forms = {row["type"]: ActionForm.fresh() for row in rows}
        run_forms = {row["type"]: ActionForm.fresh() for row in rows}
    if current_user.has_role("admin"):
        edit_forms = {row["type"]: ScheduleForm.fresh() for row in rows}
    return render_template("jobwarden/schedules.html", schedules=schedules, forms=forms,
                           run_forms=run_forms, edit_forms=edit_forms, addable=addable,
                           add=ScheduleForm.fresh() if current_user.has_role("admin") else None)


def _preview(expression: str, zone: str, now: datetime) -> list[cron.Tick]:
    try:
        return cron.preview(expression, zone, now)
    except (ValueError, StopIteration):
        return []


@bp.get("/schedules/preview")
def preview() -> ResponseReturnValue:
    """The next ticks of `cron` in `timezone` as the worker would run them, or the one
    line saying why the worker would refuse it (an HTMX fragment of the edit forms)."""
    expression = (request.args.get("cron") or "").strip()[:schedule_edits.CRON_MAX + 1]
    zone = (request.args.get("timezone") or "UTC").strip()[:schedule_edits.ZONE_MAX + 1]
    now = datetime.now(UTC)
    try:
        if len(expression) > schedule_edits.CRON_MAX or len(zone) > schedule_edits.ZONE_MAX:
            raise ValueError("too long")
        cron.check_edit("schedule", expression, zone, now)
    except ValueError as exc:
        return render_template("jobwarden/_schedule_preview.html", ticks=[], error=str(exc))
    return render_template("jobwarden/_schedule_preview.html",
                           ticks=cron.preview(expression, zone, now), error=None)


@bp.post("/schedules/<job_type>/<action>")
@role_required("operator")
def schedule_action(job_type: str, action: str) -> ResponseReturnValue:
    """Pause, resume or run now a schedule with the operator's reason (audited); 303 back."""
    user = signed_in()
    act = operations.SCHEDULE_ACTIONS.get(action)
    if act is None or not NAME_PATTERN.match(job_type):
        abort(404)
    if problem := not_shown("type", job_type):  # the same answer, right guess or wrong
        return error_page(400, "Not shown", f"{problem} Nothing was changed.")
    form = ActionForm()
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
        return _back()
    with get_db().transaction() as tx:
        result = act(tx.conn, job_type, actor=user.actor, role=user.role,
                     reason=given(form.reason), request_id=form.request_id.data)
    flash(result.message, "ok" if result.ok else "error")
    return _back()


def _back() -> ResponseReturnValue:
    return redirect(url_for("jobwarden.schedules.index"), code=303)


def _form(act: str) -> ScheduleForm | ResponseReturnValue:
    """The posted form, or a redirect with the problem (nothing was changed)."""
    form = ScheduleForm()
    if form.validate():
        return form
    if form.reason.errors:
        flash(f"A reason is required (up to 500 characters). Nothing was {act}.", "error")
    else:
        fields = ", ".join(sorted(f for f in form.errors if f != "csrf_token")) or "the form"
        flash(f"Nothing was {act}: check {fields}.", "error")
    return _back()


def _edit(form: ScheduleForm) -> ScheduleEdit:
    return ScheduleEdit(cron=form.cron.data or "", timezone=form.timezone.data or "",
                        catch_up=bool(form.catch_up.data), payload=form.payload.data or "")


def _revision(form: ScheduleForm) -> int | None:
    return bigint_digits(form.revision.data)


def _done(result: ActionResult) -> ResponseReturnValue:
    flash(result.message, "ok" if result.ok else "error")
    return _back()


@bp.post("/schedules/add")
@role_required("admin")
def add() -> ResponseReturnValue:
    """Add a schedule to a published job type that has none."""
    form = _form("added")
    if not isinstance(form, ScheduleForm):
        return form
    if problem := not_shown("type", (form.job_type.data or "").strip()):
        return error_page(400, "Not shown", f"{problem} Nothing was added.")
    user = signed_in()
    try:
        with get_db().transaction() as tx:
            result = schedule_edits.add_schedule(
                tx.conn, (form.job_type.data or "").strip(), _edit(form), actor=user.actor,
                role=user.role, reason=given(form.reason), request_id=form.request_id.data)
    except ValueError as exc:
        flash(f"Nothing was added: {exc}.", "error")
        return _back()
    return _done(result)


@bp.post("/schedules/<job_type>/edit")
@role_required("admin")
def edit(job_type: str) -> ResponseReturnValue:
    """Change a schedule, when it is still as the admin saw it."""
    if problem := not_shown("type", job_type):
        return error_page(400, "Not shown", f"{problem} Nothing was changed.")
    form = _form("changed")
    if not isinstance(form, ScheduleForm):
        return form
    revision = _revision(form)
    if revision is None:
        return _done(ActionResult(False, "edit_schedule", 0,
                                  "The form was incomplete. Reload the page and try again."))
    user = signed_in()
    try:
        with get_db().transaction() as tx:
            result = schedule_edits.edit_schedule(
                tx.conn, job_type, revision, _edit(form), actor=user.actor, role=user.role,
                reason=given(form.reason), request_id=form.request_id.data)
    except ValueError as exc:
        flash(f"Nothing was changed: {exc}.", "error")
        return _back()
    return _done(result)


@bp.post("/schedules/<job_type>/remove")
@role_required("admin")
def remove(job_type: str) -> ResponseReturnValue:
    """Remove a schedule's console edit, when it is still as the admin saw it."""
    if problem := not_shown("type", job_type):
        return error_page(400, "Not shown", f"{problem} Nothing was changed.")
    form = _form("removed")
    if not isinstance(form, ScheduleForm):
        return form
    revision = _revision(form)
    if revision is None:
        return _done(ActionResult(False, "remove_schedule", 0,
                                  "The form was incomplete. Reload the page and try again."))
    user = signed_in()
    try:
        with get_db().transaction() as tx:
            result = schedule_edits.remove_schedule(
                tx.conn, job_type, revision, actor=user.actor, role=user.role,
                reason=given(form.reason), request_id=form.request_id.data)
    except ValueError as exc:
        flash(f"Nothing was removed: {exc}.", "error")
        return _back()
    return _done(result)
