"""Failed jobs grouped by error code; drill down; bulk retry or skip with a preview."""

from __future__ import annotations

from datetime import datetime

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from console.auth import role_required
from console.database import get_db
from console.forms import GroupActionForm
from console.identity import current_user
from console.mount import settings
from console.queries import JobFilter, jobs_page, text_filter
from console.security import is_htmx
from worker import operations

bp = Blueprint("failed", __name__)


@bp.get("/failed")
def index():
    """One row per error code among failed jobs."""
    groups = get_db().all("console_failed_groups", limit=500)
    template = "jobwarden/_failed_groups.html" if is_htmx() else "jobwarden/failed.html"
    return render_template(template, groups=groups)


@bp.get("/failed/group")
def group():
    """One error code's failed jobs, its types, and the bulk actions with their preview."""
    code = text_filter(request.args.get("code"))
    if not code:
        abort(404)
    job_type = text_filter(request.args.get("type"))
    cfg = settings()
    flt = JobFilter.from_args(
        {**request.args.to_dict(), "status": "failed", "error_code": code, "type": job_type},
        cfg["PAGE_SIZE"], cfg["PAGE_SIZE_MAX"])
    with get_db().reading() as reader:
        types = reader.all("console_failed_group_types", error_code=code)
        page = jobs_page(reader, flt)
        preview = operations.preview_group(reader.conn, code, job_type)
    forms = {}
    if current_user.can_act and preview.jobs:
        for action in operations.GROUP_ACTIONS:
            form = GroupActionForm.fresh("failed")
            form.seen_until.data = preview.seen_until.isoformat() if preview.seen_until else ""
            form.job_type.data = job_type or ""
            form.previewed.data = str(preview.jobs)
            forms[action] = form
    def page_link(before, after=None):
        """The group's page at a keyset position (the same signature as the jobs list's)."""
        return url_for("jobwarden.failed.group", code=code, type=job_type, before=before,
                       after=after, limit=flt.limit if flt.limit != cfg["PAGE_SIZE"] else None)

    return render_template("jobwarden/failed_group.html", code=code, job_type=job_type, types=types,
                           page=page, flt=flt, preview=preview, forms=forms, page_link=page_link)


@bp.post("/failed/group/<action>")
@role_required("operator")
def group_action(action: str):
    """Retry or skip every failed job of the group that the operator previewed."""
    act = operations.GROUP_ACTIONS.get(action)
    code = text_filter(request.args.get("code"))
    if act is None or not code:
        abort(404)
    form = GroupActionForm()
    job_type = text_filter(form.job_type.data)
    back = url_for("jobwarden.failed.group", code=code, **({"type": job_type} if job_type else {}))
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
        return redirect(back, code=303)
    seen_until = _parse_time(form.seen_until.data)
    if seen_until is None:
        flash("The preview is missing; review the group again. Nothing was changed.", "error")
        return redirect(back, code=303)
    with get_db().transaction() as conn:
        result = act(conn, code, actor=current_user.username, role=current_user.role,
                     reason=form.reason.data, seen_until=seen_until, job_type=job_type,
                     request_id=form.request_id.data)
    flash(result.message, "ok" if result.ok else "error")
    return redirect(url_for("jobwarden.failed.index") if result.ok else back, code=303)


def _parse_time(value: str | None) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value or "")
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None
