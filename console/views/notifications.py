"""Notifications (admin only): where the worker's notifier sends what started failing,
each target's figures, the latest messages; add, edit and delete a target and send it a
test message, each audited with its reason (docs/guide/notifications.md).

A viewer or an operator gets a 403 for every route: a target's existence, name and
figures are an admin's business, like the users. Secrets go one way: typed into a
password field, stored, never rendered back (the URL is shown as its scheme and host);
an edit that leaves one empty keeps the stored one.
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data.database import get_db
from jobwarden.console.data.notifications import recent, target_rows
from jobwarden.console.data.queries import bigint_digits
from jobwarden.console.web.auth import role_required
from jobwarden.console.web.forms import ActionForm, TargetForm, given
from jobwarden.console.web.identity import signed_in
from jobwarden.worker.core.notices import NOTIFY_TYPE
from jobwarden.worker.core.settings import NotifySettings
from jobwarden.worker.core.targets import Target
from jobwarden.worker.ops import notify_targets
from jobwarden.worker.ops.operations import ActionResult

bp = Blueprint("notifications", __name__)


def _settings() -> NotifySettings:
    """The notifications' settings as this console reads them (create_app(config) and
    Console(settings=...) may give the console URL; the rest is the environment's)."""
    env = NotifySettings.current()
    return env.model_copy(update={"console_url": settings().get("EXTERNAL_URL")})


@bp.get("/notifications")
@role_required("admin")
def index() -> ResponseReturnValue:
    """The targets with their figures, the forms that change them, the latest messages."""
    env = _settings()
    with get_db().reading() as reader:
        rows = target_rows(reader, env)
        messages = recent(reader, {r.key: r.name for r in rows})
    forms = {r.key: TargetForm.fresh() for r in rows if r.console}
    tests = {r.key: ActionForm.fresh() for r in rows}
    return render_template("jobwarden/notifications.html", rows=rows, messages=messages,
                           forms=forms, tests=tests, add=TargetForm.fresh(),
                           notify_type=NOTIFY_TYPE, queue=env.notify_queue,
                           period=env.notify_period, allow_private=env.notify_allow_private)


def _target(form: TargetForm, kind: str) -> Target:
    """The form's fields as a target (checked by the operation, not here)."""
    return Target(key="", name=(form.name.data or "").strip(), kind=kind, console=True,
                  url=(form.url.data or "").strip() or None,
                  secret=form.secret.data or None, format=form.format.data or "json",
                  smtp_host=(form.smtp_host.data or "").strip() or None,
                  smtp_port=form.smtp_port.data or 587,
                  smtp_user=(form.smtp_user.data or "").strip() or None,
                  smtp_password=form.smtp_password.data or None,
                  starttls=bool(form.starttls.data),
                  email_from=(form.email_from.data or "").strip() or None,
                  email_to=tuple((form.email_to.data or "").split(",")))


def _answer(form: TargetForm, act: str) -> ResponseReturnValue | None:
    """A redirect with the problem when the form did not validate (never its values)."""
    if form.validate():
        return None
    if form.reason.errors:
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
    else:
        fields = ", ".join(sorted(f for f in form.errors if f != "csrf_token")) or "the form"
        flash(f"Nothing was {act}: check {fields}.", "error")
    return redirect(url_for("jobwarden.notifications.index"), code=303)


def _done(run: ActionResult | None) -> ResponseReturnValue:
    if isinstance(run, ActionResult):
        flash(run.message, "ok" if run.ok else "error")
    return redirect(url_for("jobwarden.notifications.index"), code=303)


@bp.post("/notifications/targets")
@role_required("admin")
def add() -> ResponseReturnValue:
    """Add a target."""
    form = TargetForm()
    refused = _answer(form, "added")
    if refused is not None:
        return refused
    user = signed_in()
    try:
        with get_db().transaction() as tx:
            result = notify_targets.add_target(
                tx.conn, _target(form, form.kind.data or "webhook"), actor=user.actor,
                role=user.role, reason=given(form.reason), request_id=form.request_id.data,
                settings=_settings())
    except ValueError as exc:
        flash(f"Nothing was added: {exc}.", "error")
        return _done(None)
    return _done(result)


@bp.post("/notifications/targets/<int:target_id>")
@role_required("admin")
def edit(target_id: int) -> ResponseReturnValue:
    """Change a target, when it is still as the admin saw it."""
    form = TargetForm()
    refused = _answer(form, "changed")
    if refused is not None:
        return refused
    revision = _revision(form)
    if revision is None:
        return _done(ActionResult(False, "edit_notify_target", 0,
                                  "The form was incomplete. Reload the page and try again."))
    user = signed_in()
    try:
        with get_db().transaction() as tx:
            result = notify_targets.edit_target(
                tx.conn, target_id, revision, _target(form, ""), actor=user.actor,
                role=user.role, reason=given(form.reason), request_id=form.request_id.data,
                clear_secret=bool(form.clear_secret.data), settings=_settings())
    except ValueError as exc:
        flash(f"Nothing was changed: {exc}.", "error")
        return _done(None)
    return _done(result)


@bp.post("/notifications/targets/<int:target_id>/delete")
@role_required("admin")
def delete(target_id: int) -> ResponseReturnValue:
    """Remove a target, when it is still as the admin saw it."""
    form = TargetForm()
    refused = _answer(form, "deleted")
    if refused is not None:
        return refused
    revision = _revision(form)
    if revision is None:
        return _done(ActionResult(False, "delete_notify_target", 0,
                                  "The form was incomplete. Reload the page and try again."))
    user = signed_in()
    with get_db().transaction() as tx:
        result = notify_targets.delete_target(
            tx.conn, target_id, revision, actor=user.actor, role=user.role,
            reason=given(form.reason), request_id=form.request_id.data)
    return _done(result)


@bp.post("/notifications/test")
@role_required("admin")
def test() -> ResponseReturnValue:
    """Queue a test message to one target (`target`: its key)."""
    form = ActionForm()
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was sent.", "error")
        return _done(None)
    key = (request.form.get("target") or "").strip()[:40]
    user = signed_in()
    with get_db().transaction() as tx:
        result = notify_targets.send_test(
            tx.conn, key, actor=user.actor, role=user.role, reason=given(form.reason),
            request_id=form.request_id.data, settings=_settings())
    return _done(result)


def _revision(form: TargetForm) -> int | None:
    return bigint_digits(form.revision.data)
