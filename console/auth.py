"""Logins, sessions and roles: viewer reads, operator acts, admin manages users."""

from __future__ import annotations

from functools import wraps

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from flask import Blueprint, abort, flash, redirect, render_template, request, session, url_for
from flask_login import LoginManager, UserMixin, current_user, login_user, logout_user

from console import login_throttle
from console.account_policy import normalize_username
from console.database import Q, get_db
from console.forms import LoginForm, LogoutForm
from console.schema import ROLES
from console.security import is_htmx, safe_next_url

bp = Blueprint("auth", __name__)
login_manager = LoginManager()
hasher = PasswordHasher()
#: Compared against when the user does not exist, so timing does not reveal names.
_DUMMY_HASH = hasher.hash("jobwarden-no-such-user")
ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}
#: Endpoints reachable without a session.
# /metrics checks its own credentials (a scraper's bearer token, or a session).
PUBLIC_ENDPOINTS = frozenset({"auth.login", "static", "metrics.metrics"})


#: Session key holding the user's session generation when the session was issued.
SESSION_GENERATION = "generation"


class ConsoleUser(UserMixin):
    def __init__(self, row: dict) -> None:
        self.id = str(row["id"])
        self.username = row["username"]
        self.role = row["role"]
        self.session_generation = row["session_generation"]

    def has_role(self, needed: str) -> bool:
        return ROLE_RANK.get(self.role, -1) >= ROLE_RANK[needed]

    @property
    def can_act(self) -> bool:
        return self.has_role("operator")


def hash_password(password: str) -> str:
    return hasher.hash(password)


@login_manager.user_loader
def load_user(user_id: str) -> ConsoleUser | None:
    if not user_id.isdigit():
        return None
    row = get_db().one("console_user_by_id", user_id=int(user_id))
    if row is None or row["disabled"]:
        return None
    # A cookie issued before the user signed out, or before an admin changed their
    # password or role, carries an older generation: it no longer signs anyone in.
    if session.get(SESSION_GENERATION) != row["session_generation"]:
        return None
    return ConsoleUser(row)


@login_manager.unauthorized_handler
def unauthorized():
    """Pages redirect to the login form; htmx fragments ask the browser to go there."""
    reading = request.method in ("GET", "HEAD")
    back = request.full_path.rstrip("?") if reading and not is_htmx() else None
    login_url = url_for("auth.login", next=back)
    if is_htmx():
        return "", 401, {"HX-Redirect": login_url}
    if not reading:
        abort(401)
    return redirect(login_url)


def require_login_everywhere() -> None:
    """before_request hook: every endpoint but the login page and static files needs a user."""
    if request.endpoint in PUBLIC_ENDPOINTS:
        return None
    if not current_user.is_authenticated:
        return login_manager.unauthorized()
    return None


def role_required(role: str):
    """Decorator: 403 unless the signed-in user has `role` or a higher one."""

    def decorate(view):
        @wraps(view)
        def wrapped(*args, **kwargs):
            if not current_user.is_authenticated or not current_user.has_role(role):
                abort(403)
            return view(*args, **kwargs)

        return wrapped

    return decorate


def verify_login(username: str, password: str) -> dict | None:
    """The user row if the password matches an enabled account, else None."""
    row = get_db().one("console_user_by_name", username=username)
    if row is None or row["disabled"]:
        _verify(_DUMMY_HASH, password)
        return None
    if not _verify(row["password_hash"], password):
        return None
    rehashed = hash_password(password) if hasher.check_needs_rehash(row["password_hash"]) else None
    with get_db().transaction() as conn:
        conn.exec_driver_sql(Q.console_user_touch_login,
                             {"user_id": row["id"], "password_hash": rehashed})
    return row


def _verify(password_hash: str, password: str) -> bool:
    try:
        return hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


@bp.route("/login", methods=["GET", "POST"])
def login():
    """The sign-in form."""
    form = LoginForm()
    next_url = safe_next_url(request.values.get("next"), url_for("overview.index"))
    if current_user.is_authenticated and request.method == "GET":
        return redirect(next_url)
    if form.validate_on_submit():
        try:
            username = normalize_username(form.username.data)
        except ValueError:
            username = ""  # no such user can exist: counted and refused like a wrong one
        subjects = login_throttle.Subjects.of(username, request.remote_addr)
        wait = login_throttle.seconds_locked(subjects)
        if wait:
            flash(f"Too many failed sign-ins: try again in {wait} s.", "error")
            return render_template("login.html", form=form, next_url=next_url), 429, {
                "Retry-After": str(wait)}
        row = verify_login(username, form.password.data)
        if row is None:
            login_throttle.record_failure(subjects)
        else:
            login_throttle.record_success(subjects)
            session.clear()  # a fresh session on sign-in: no fixation
            login_user(ConsoleUser(row))
            session[SESSION_GENERATION] = row["session_generation"]
            session.permanent = True
            return redirect(next_url, code=303)
        flash("Unknown user name or wrong password.", "error")
    return render_template("login.html", form=form, next_url=next_url), (
        401 if request.method == "POST" else 200)


@bp.route("/logout", methods=["POST"])
def logout():
    """Sign out (POST with CSRF, so a link on another site cannot sign you out)."""
    LogoutForm()  # CSRF was already checked by CSRFProtect
    if current_user.is_authenticated:
        # Every copy of this user's cookies stops working, not only this browser's.
        with get_db().transaction() as conn:
            conn.exec_driver_sql(Q.console_user_end_sessions, {"user_id": int(current_user.id)})
    logout_user()
    session.clear()
    return redirect(url_for("auth.login"), code=303)
