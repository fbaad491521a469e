"""The shop's back office: staff sign-in (Flask-Login), orders, and the fake CRM's switch.

`console_identity` is the hook the mounted jobs console calls on each request: the
signed-in staff member's name and console role, or None.
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_login import LoginManager, current_user, login_required, login_user, logout_user
from flask_wtf import FlaskForm
from werkzeug.security import check_password_hash, generate_password_hash
from wtforms import PasswordField, StringField
from wtforms.validators import DataRequired, Length

from jobwarden.console import safe_next_url
from shop import providers
from shop.models import Order, Staff, db

bp = Blueprint("admin", __name__)
login_manager = LoginManager()
login_manager.login_view = "admin.login"


class LoginForm(FlaskForm):
    username = StringField("User name", validators=[DataRequired(), Length(max=100)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=200)])


class ButtonForm(FlaskForm):
    """A POST with only its CSRF token."""


@login_manager.user_loader
def load_staff(staff_id: str) -> Staff | None:
    return db.session.get(Staff, int(staff_id)) if staff_id.isdigit() else None


def console_identity() -> tuple[str, str] | None:
    """For the jobs console: (user name, role) of the signed-in staff member, or None."""
    if current_user.is_authenticated:
        return current_user.username, current_user.console_role
    return None


def add_staff(username: str, password: str, console_role: str = "operator") -> Staff:
    """Create a staff account, or reset its password and role (the caller commits)."""
    staff = db.session.execute(db.select(Staff).filter_by(username=username)).scalar()
    if staff is None:
        staff = Staff(username=username)
        db.session.add(staff)
    staff.password_hash = generate_password_hash(password)
    staff.console_role = console_role
    return staff


@bp.route("/login", methods=["GET", "POST"])
def login():
    form = LoginForm()
    if form.validate_on_submit():
        staff = db.session.execute(
            db.select(Staff).filter_by(username=form.username.data.strip())).scalar()
        if staff and check_password_hash(staff.password_hash, form.password.data):
            login_user(staff)
            # Only paths on this site, by the console's own rule: a home-made check such as
            # "starts with / but not //" lets "/%09/evil.example" through to another host.
            target = safe_next_url(request.args.get("next"), url_for("admin.dashboard"))
            return redirect(target, code=303)
        flash("Unknown user name or wrong password.")
    return render_template("shop/login.html", form=form)


@bp.post("/logout")
@login_required
def logout():
    ButtonForm()  # CSRF checked by CSRFProtect
    logout_user()
    return redirect(url_for("store.index"), code=303)


@bp.get("/")
@login_required
def dashboard():
    orders = db.session.execute(db.select(Order).order_by(Order.id.desc()).limit(50)).scalars()
    return render_template("shop/admin.html", orders=list(orders),
                           crm_broken=providers.crm_broken(), form=ButtonForm())


@bp.post("/crm/<any(break, fix):action>")
@login_required
def crm_switch(action: str):
    ButtonForm()
    providers.set_crm_broken(action == "break")
    db.session.commit()
    flash("The CRM is down: every call answers 503." if action == "break"
          else "The CRM is back.")
    return redirect(url_for("admin.dashboard"), code=303)
