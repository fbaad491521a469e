"""Queues: counts and oldest wait per queue, pausing or resuming one, and the live limits
of queues and job types (maximum concurrency, rate), each action audited; a job type's
page with its policy, its limit and the figures that go with it, and its handler's
durations over a day or a week with the moments a new version or its workers started."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.data import queries
from jobwarden.console.data.database import get_db
from jobwarden.console.data.durations import STARTS_LIMIT, duration_history
from jobwarden.console.data.limits import (
    FAIR_KEYS_SHOWN,
    RATE_WINDOW,
    fair_keys,
    job_type_policy,
    limits,
)
from jobwarden.console.web import charts
from jobwarden.console.web.auth import role_required
from jobwarden.console.web.errors import page as error_page
from jobwarden.console.web.forms import ActionForm, LimitForm, given
from jobwarden.console.web.identity import current_user, signed_in
from jobwarden.console.web.reads import page_reads
from jobwarden.worker.jobs.registry import NAME_PATTERN
from jobwarden.worker.ops import operations
from jobwarden.worker.store.schema import JOB_STATUSES

bp = Blueprint("queues", __name__)


@bp.get("/queues")
def index() -> ResponseReturnValue:
    """Every queue with its counts and whether workers may claim from it, and every
    limited queue and type with its limit, current rate and waiting jobs."""
    with page_reads().reading() as reader:
        overview = queries.overview(reader)
        controls = operations.queue_controls(reader.conn)
        limit_rows = limits(reader)
    names = sorted({t.label for t in overview.by_queue} | set(controls))
    counts = {t.label: t for t in overview.by_queue}
    queue_limits = {r.name: r for r in limit_rows if r.scope == "queue"}
    forms = {}
    limit_forms = {}
    if current_user.has_role("operator"):
        forms = {name: ActionForm.fresh() for name in names}
        limit_forms = {("queue", name): LimitForm.fresh() for name in names}
        limit_forms.update({(r.scope, r.name): LimitForm.fresh() for r in limit_rows})
        limit_forms[("new", "")] = LimitForm.fresh()
    return render_template("jobwarden/queues.html", names=names, counts=counts, controls=controls,
                           forms=forms, statuses=JOB_STATUSES, limit_rows=limit_rows,
                           queue_limits=queue_limits, limit_forms=limit_forms,
                           rate_window=RATE_WINDOW)


@bp.get("/types/<job_type>")
def job_type(job_type: str) -> ResponseReturnValue:
    """One job type: its published policy, its limit (declared and live) with who set it,
    its current rate, running and waiting jobs; its handler's p50 and p95 durations per
    bucket over `?range=` (24h or 7d) with the marks of versions and worker starts; and,
    for a type with a fair key, each key's backlog and oldest wait, flagged past the SLA."""
    if not NAME_PATTERN.match(job_type):
        abort(404)
    if problem := queries.not_shown("type", job_type):  # the same answer, right or wrong
        return error_page(400, "Not shown", f"{problem} Nothing was searched.")
    with page_reads().reading() as reader:
        policy = job_type_policy(reader, job_type)
        found = limits(reader, "type", job_type)
        durations = duration_history(reader, job_type, request.args.get("range", ""))
        fair, fair_total = fair_keys(reader, job_type,
                                     policy["sla_seconds"] if policy else None)
    form = LimitForm.fresh() if current_user.has_role("operator") else None
    return render_template("jobwarden/job_type.html", name=job_type, policy=policy,
                           limit=found[0] if found else None, form=form,
                           rate_window=RATE_WINDOW, durations=durations,
                           duration_chart=charts.duration_chart(durations),
                           starts_limit=STARTS_LIMIT, fair=fair, fair_total=fair_total,
                           fair_shown=FAIR_KEYS_SHOWN)


@bp.post("/queues/<queue>/<action>")
@role_required("operator")
def queue_action(queue: str, action: str) -> ResponseReturnValue:
    """Pause or resume a queue with the operator's reason; answer with a 303 and a message."""
    user = signed_in()
    act = operations.QUEUE_ACTIONS.get(action)
    if act is None or not NAME_PATTERN.match(queue):
        abort(404)
    if problem := queries.not_shown("queue", queue):
        return _not_shown(problem)
    form = ActionForm()
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
        return redirect(url_for("jobwarden.queues.index"), code=303)
    with get_db().transaction() as tx:
        result = act(tx.conn, queue, actor=user.actor, role=user.role,
                     reason=given(form.reason), request_id=form.request_id.data)
    flash(result.message, "ok" if result.ok else "error")
    return redirect(url_for("jobwarden.queues.index"), code=303)


@bp.post("/limits/<action>")
@role_required("operator")
def limit_action(action: str) -> ResponseReturnValue:
    """Set or clear a queue's or a type's live limit (`scope` and `name` in the form),
    with the operator's reason; answer with a 303 back to the page it came from."""
    user = signed_in()
    if action not in ("set", "clear"):
        abort(404)
    scope = request.form.get("scope", "")
    name = (request.form.get("name") or "").strip()
    if scope not in operations.LIMIT_SCOPES or not NAME_PATTERN.match(name):
        flash("Name a queue or a job type (letters, digits, '_', '.', ':' or '-'). "
              "Nothing was changed.", "error")
        return redirect(url_for("jobwarden.queues.index"), code=303)
    if problem := queries.not_shown("queue" if scope == "queue" else "type", name):
        return _not_shown(problem)
    back = (url_for("jobwarden.queues.job_type", job_type=name)
            if scope == "type" and request.form.get("back") == "type"
            else url_for("jobwarden.queues.index"))
    form = LimitForm()
    if not form.validate():
        problems = "; ".join(f"{field}: {' '.join(errors)}"
                             for field, errors in form.errors.items())
        flash(f"Nothing was changed: {problems}.", "error")
        return redirect(back, code=303)
    try:
        with get_db().transaction() as tx:
            if action == "set":
                result = operations.set_limit(
                    tx.conn, scope, name, actor=user.actor, role=user.role,
                    reason=given(form.reason), max_concurrency=form.max_concurrency.data,
                    rate=(form.rate.data or "").strip() or None, burst=form.burst.data,
                    request_id=form.request_id.data)
            else:
                result = operations.clear_limit(
                    tx.conn, scope, name, actor=user.actor, role=user.role,
                    reason=given(form.reason), request_id=form.request_id.data)
    except ValueError as exc:
        flash(f"Nothing was changed: {exc}.", "error")
        return redirect(back, code=303)
    flash(result.message, "ok" if result.ok else "error")
    return redirect(back, code=303)


def _not_shown(problem: str) -> ResponseReturnValue:
    """An action on a name the pages show as [REDACTED]: refused before anything is read,
    so a right and a wrong guess at it get the same answer."""
    return error_page(400, "Not shown", f"{problem} Nothing was changed.")
