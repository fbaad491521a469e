"""Console users (admin only): add a user, change a role, disable an account."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from sqlalchemy.exc import IntegrityError

from jobwarden.console.core.account_policy import MIN_PASSWORD, check_password, normalize_username
from jobwarden.console.core.config import mounted
from jobwarden.console.data.database import CQ, get_db
from jobwarden.console.web.auth import hash_password, role_required
from jobwarden.console.web.forms import UserAccessForm, UserForm, given
from jobwarden.console.web.identity import current_user
from jobwarden.console.web.reads import primary_page

bp = Blueprint("users", __name__)


@bp.before_request
def only_with_the_consoles_own_login() -> None:
    """Under a host's user_loader the host manages who may do what: console users made
    here would sign in to a standalone console on the same database, past the host."""
    if not mounted().own_login:
        abort(404)


@bp.get("/users")
@role_required("admin")
def index() -> ResponseReturnValue:
    """Every console user and their role."""
    users = primary_page().all(CQ.console_users_list)
    return render_template("jobwarden/users.html", users=users, form=UserForm(formdata=None),
                           min_password=MIN_PASSWORD,
                           access_forms={u["id"]: UserAccessForm(formdata=None, role=u["role"],
                                                                 access=("disabled" if u["disabled"]
                                                                         else "enabled"))
                                         for u in users})


@bp.post("/users")
@role_required("admin")
def add() -> ResponseReturnValue:
    """Create a user or reset an existing user's password and role."""
    form = UserForm()
    if not form.validate():
        flash("A user name, a password and a role are required.", "error")
        return redirect(url_for("jobwarden.users.index"), code=303)
    try:
        username = normalize_username(form.username.data)
        check_password(form.password.data, username)
        _not_a_look_alike(given(form.username), username)
    except ValueError as exc:
        flash(f"Not saved: {exc}.", "error")
        return redirect(url_for("jobwarden.users.index"), code=303)
    if username == current_user.username and form.role.data != current_user.role:
        # As on the access form: an admin never demotes themselves (the last one could not
        # come back).
        flash("You cannot change your own role.", "error")
        return redirect(url_for("jobwarden.users.index"), code=303)
    try:
        with get_db().transaction() as tx:
            saved = tx.all(CQ.console_user_upsert, username=username,
                           password_hash=hash_password(given(form.password)), role=form.role.data)
    except IntegrityError:
        flash("That user could not be saved.", "error")
        return redirect(url_for("jobwarden.users.index"), code=303)
    if not saved:
        flash(f"{username} is the last admin: add another admin first.", "error")
        return redirect(url_for("jobwarden.users.index"), code=303)
    flash(f"User {username} saved with role {form.role.data}.", "ok")
    return redirect(url_for("jobwarden.users.index"), code=303)


def _not_a_look_alike(typed: str, username: str) -> None:
    """ValueError when `typed` is not `username` as written but folds to an existing user's
    name ("ｏｐ１" or "OP1" for op1): this form resets an existing user, and a reset must
    be asked for by the user's exact name, never reached by normalization."""
    if typed.strip() != username and get_db().one(CQ.console_user_by_name, username=username):
        raise ValueError(f"{typed.strip()!r} is written differently from the existing user "
                         f"{username!r}: type {username!r} to reset them")


@bp.post("/users/<int:user_id>/access")
@role_required("admin")
def access(user_id: int) -> ResponseReturnValue:
    """Change a user's role or disable them (not yourself: no locking out the last admin)."""
    form = UserAccessForm()
    if not form.validate():
        abort(400)
    if str(user_id) == current_user.id:
        flash("You cannot change your own access.", "error")
        return redirect(url_for("jobwarden.users.index"), code=303)
    with get_db().transaction() as tx:
        done = tx.all(CQ.console_user_set_access, user_id=user_id, role=form.role.data,
                      disabled=form.access.data == "disabled")
        found = done or tx.all(CQ.console_user_exists, user_id=user_id)
    if not found:
        abort(404)
    if not done:
        flash("The last enabled admin cannot be demoted or disabled.", "error")
        return redirect(url_for("jobwarden.users.index"), code=303)
    flash("Access updated.", "ok")
    return redirect(url_for("jobwarden.users.index"), code=303)
