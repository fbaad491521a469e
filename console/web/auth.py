"""Logins, sessions and roles: viewer reads, operator acts, admin manages users.

Who the user is comes from one of two places. Mounted with a `user_loader`, the host
application says (jobwarden.console.mount); otherwise the console signs users in itself, against
`console_users`, and keeps their id in the session under `jobwarden_user_id`.

The console does not use Flask-Login: its LoginManager is one per application and owns
fixed session keys, so a console using it would take over the login of any host that has
its own. Its part here is small — one session key, one user lookup per request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.typing import ResponseReturnValue

from jobwarden.console.core.account_policy import normalize_username
from jobwarden.console.core.config import mounted, settings
from jobwarden.console.data.database import CQ, Row, get_db
from jobwarden.console.web import login_throttle
from jobwarden.console.web.forms import LoginForm, LogoutForm
from jobwarden.console.web.identity import (
    ANONYMOUS,
    AnonymousUser,
    ConsoleUser,
    HostIdentityError,
    current_user,
    host_user,
    request_user,
)
from jobwarden.console.web.security import forget_csrf_secret, is_htmx, safe_next_url, this_page

P = ParamSpec("P")
R = TypeVar("R")

bp = Blueprint("auth", __name__)
log = logging.getLogger("jobwarden.console")
hasher = PasswordHasher()
#: Compared against when the user does not exist, so timing does not reveal names.
_DUMMY_HASH = hasher.hash("jobwarden-no-such-user")
#: The console's keys in the (possibly shared) session: the user's id, and their session
#: generation when the session was issued.
SESSION_USER = "jobwarden_user_id"
SESSION_GENERATION = "jobwarden_generation"
#: Endpoints reachable without a user.
# /metrics checks its own credentials (a scraper's bearer token, or a session).
PUBLIC_ENDPOINTS = frozenset({"jobwarden.auth.login", "jobwarden.static",
                              "jobwarden.metrics.metrics"})


def hash_password(password: str) -> str:
    return hasher.hash(password)


def install(parent: Blueprint) -> None:
    """Identify the user on every console request, and demand one where it is needed."""
    parent.before_request(identify)
    parent.before_request(require_login)

    @parent.context_processor
    def console_user_context() -> dict[str, Any]:
        # formdata=None: the header only renders it (a refused, oversized POST must not be
        # read again here)
        return {"current_user": current_user, "logout_form": LogoutForm(formdata=None),
                "own_login": mounted().own_login, "host_links": host_links,
                "config_poll": settings()["OVERVIEW_POLL_SECONDS"],
                "console_settings": settings()}


def host_links() -> dict[str, Any]:
    """The host's pages the top bar links to: `home_url` (the mounted console's
    home_view, else the site's root when mounted under a prefix) with its label, and
    `logout_url` (a host login's logout_view; `logout_post` when it takes a POST form)."""
    mount = mounted()
    home = url_for(mount.home_view) if mount.home_view else (
        request.script_root + "/" if mount.url_prefix else None)
    links: dict[str, Any] = {"home_url": home, "home_label": mount.home_label, "logout_url": None,
             "logout_post": False}
    if mount.logout_view and not mount.own_login:
        links["logout_url"] = url_for(mount.logout_view)
        links["logout_post"] = any("POST" in (rule.methods or ())
                                   for rule in current_app.url_map.iter_rules(mount.logout_view))
    return links


def identify() -> None:
    """Set g.jobwarden_user from the host's user_loader, or from the console's session."""
    if request.endpoint == "jobwarden.static":
        return  # files for everyone: no user lookup per stylesheet
    mount = mounted()
    if mount.user_loader is not None:
        try:
            g.jobwarden_user = host_user(mount.user_loader())
        except HostIdentityError as exc:
            # The host vouches for someone the console cannot name or give a role: refuse
            # them (403) and say why in the log, rather than a 500 for a host's typo.
            log.warning("console request refused: %s", exc,
                        extra={"action": "console_host_identity_refused"})
            abort(403)
    else:
        g.jobwarden_user = _session_user()


def _session_user() -> ConsoleUser | AnonymousUser:
    user_id = session.get(SESSION_USER)
    if not isinstance(user_id, int):
        return ANONYMOUS
    row = get_db().one(CQ.console_user_by_id, user_id=user_id)
    if row is None or row["disabled"]:
        return ANONYMOUS
    # A cookie issued before the user signed out, or before an admin changed their
    # password or role, carries an older generation: it no longer signs anyone in.
    if session.get(SESSION_GENERATION) != row["session_generation"]:
        return ANONYMOUS
    return _user(row)


def _user(row: Row) -> ConsoleUser:
    return ConsoleUser(username=row["username"], role=row["role"], id=str(row["id"]))


def require_login() -> ResponseReturnValue | None:
    """Every console endpoint but the login page, static files and /metrics needs a user."""
    if request.endpoint in PUBLIC_ENDPOINTS or current_user.is_authenticated:
        return None
    return unauthorized()


def unauthorized() -> ResponseReturnValue:
    """Pages redirect to the login form; htmx fragments ask the browser to go there.

    With a host user_loader that is the host's `login_view`, or a 403 without one.
    """
    mount = mounted()
    login_endpoint = "jobwarden.auth.login" if mount.own_login else mount.login_view
    if login_endpoint is None:
        abort(403)
    reading = request.method in ("GET", "HEAD")
    back = this_page() if reading and not is_htmx() else None
    login_url = url_for(login_endpoint, next=back)
    if is_htmx():
        return "", 401, {"HX-Redirect": login_url}
    if not reading:
        abort(401)
    return redirect(login_url)


def role_required(role: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: 403 unless the signed-in user has `role` or a higher one."""

    def decorate(view: Callable[P, R]) -> Callable[P, R]:
        @wraps(view)
        def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
            if not current_user.is_authenticated or not current_user.has_role(role):
                abort(403)
            return view(*args, **kwargs)

        return wrapped

    return decorate


def verify_login(username: str, password: str) -> Row | None:
    """The user row if the password matches an enabled account, else None."""
    row = get_db().one(CQ.console_user_by_name, username=username)
    if row is None or row["disabled"]:
        _verify(_DUMMY_HASH, password)
        return None
    if not _verify(row["password_hash"], password):
        return None
    rehashed = hash_password(password) if hasher.check_needs_rehash(row["password_hash"]) else None
    with get_db().transaction() as tx:
        tx.run(CQ.console_user_touch_login, user_id=row["id"], password_hash=rehashed)
    return row


def _verify(password_hash: str, password: str) -> bool:
    try:
        return hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _end_console_session() -> None:
    """Forget the console's sign-in: the whole session when the console owns it, only its
    own keys and the CSRF secret when it shares the host's (whose user stays signed in).
    A CSRF token handed out before sign-in, to whoever planted the session, stops working."""
    if settings()["OWNS_SESSION"]:
        session.clear()
    else:
        for key in [k for k in session if k.startswith("jobwarden_")]:
            session.pop(key)
        forget_csrf_secret()


@bp.route("/login", methods=["GET", "POST"])
def login() -> ResponseReturnValue:
    """The sign-in form (only when the console has its own login)."""
    if not mounted().own_login:
        abort(404)
    form = LoginForm()
    next_url = safe_next_url(request.values.get("next"), url_for("jobwarden.overview.index"))
    if current_user.is_authenticated and request.method == "GET":
        return redirect(next_url)
    if form.validate_on_submit():
        try:
            username = normalize_username(form.username.data)
        except ValueError:
            username = ""  # no such user can exist: counted and refused like a wrong one
        subjects = login_throttle.Subjects.of(username, request.remote_addr)
        try:
            attempt = login_throttle.admit(subjects)
        except login_throttle.Locked as locked:
            flash(f"Too many failed sign-ins: try again in {locked.seconds} s.", "error")
            return render_template("jobwarden/login.html", form=form, next_url=next_url), 429, {
                "Retry-After": str(locked.seconds)}
        row = None
        try:
            row = verify_login(username, form.password.data or "")
        finally:
            if row is None:  # wrong, or the check itself failed: the lock's delay starts
                login_throttle.record_failure(attempt)
        if row is not None:
            login_throttle.record_success(attempt)
            _end_console_session()  # a fresh session on sign-in: no fixation
            session[SESSION_USER] = row["id"]
            session[SESSION_GENERATION] = row["session_generation"]
            if settings()["OWNS_SESSION"]:
                session.permanent = True
            # Sharing the host's session, whether it is permanent stays the host's choice.
            return redirect(next_url, code=303)
        flash("Unknown user name or wrong password.", "error")
    return render_template("jobwarden/login.html", form=form, next_url=next_url), (
        401 if request.method == "POST" else 200)


@bp.route("/logout", methods=["POST"])
def logout() -> ResponseReturnValue:
    """Sign out (POST with CSRF, so a link on another site cannot sign you out)."""
    if not mounted().own_login:
        abort(404)
    LogoutForm()  # CSRF was already checked by the console's before_request
    user = request_user()
    if isinstance(user, ConsoleUser) and user.id is not None:  # the console's own user
        # Every copy of this user's cookies stops working, not only this browser's.
        with get_db().transaction() as tx:
            tx.run(CQ.console_user_end_sessions, user_id=int(user.id))
    _end_console_session()
    return redirect(url_for("jobwarden.auth.login"), code=303)
