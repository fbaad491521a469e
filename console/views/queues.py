"""Queues: counts and oldest wait per queue, and pausing or resuming one (audited)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, url_for

from console.data import queries
from console.data.database import get_db
from console.web.auth import role_required
from console.web.forms import ActionForm
from console.web.identity import current_user
from worker.jobs.registry import NAME_PATTERN
from worker.ops import operations
from worker.store.schema import JOB_STATUSES

bp = Blueprint("queues", __name__)


@bp.get("/queues")
def index():
    """Every queue with its counts and whether workers may claim from it."""
    with get_db().reading() as reader:
        overview = queries.overview(reader)
        controls = operations.queue_controls(reader.conn)
    names = sorted({t.label for t in overview.by_queue} | set(controls))
    counts = {t.label: t for t in overview.by_queue}
    forms = {}
    if current_user.has_role("operator"):
        forms = {name: ActionForm.fresh() for name in names}
    return render_template("jobwarden/queues.html", names=names, counts=counts, controls=controls,
                           forms=forms, statuses=JOB_STATUSES)


@bp.post("/queues/<queue>/<action>")
@role_required("operator")
def queue_action(queue: str, action: str):
    """Pause or resume a queue with the operator's reason; answer with a 303 and a message."""
    act = operations.QUEUE_ACTIONS.get(action)
    if act is None or not NAME_PATTERN.match(queue):
        abort(404)
    form = ActionForm()
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
        return redirect(url_for("jobwarden.queues.index"), code=303)
    with get_db().transaction() as tx:
        result = act(tx.conn, queue, actor=current_user.actor, role=current_user.role,
                     reason=form.reason.data, request_id=form.request_id.data)
    flash(result.message, "ok" if result.ok else "error")
    return redirect(url_for("jobwarden.queues.index"), code=303)
