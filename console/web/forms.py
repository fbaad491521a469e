"""WTForms for sign-in and operator actions (CSRF-protected by Flask-WTF)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime

from flask_wtf import FlaskForm
from wtforms import (
    BooleanField,
    Field,
    HiddenField,
    IntegerField,
    PasswordField,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import AnyOf, DataRequired, Length, NumberRange, Optional

from jobwarden.console.core.config import settings
from jobwarden.console.data.schema import ROLES
from jobwarden.worker.core.targets import FORMATS, TARGET_KINDS
from jobwarden.worker.ops.operations import DEPENDENTS_CHOICES, REASON_MAX, RETRIED_NEVER
from jobwarden.worker.store.schema import JOB_STATUSES


def given(field: Field) -> str:
    """The text of a required field (DataRequired) of a form that validated: there is one
    then, so its absence is a mistake in the view, never the user's input."""
    if not isinstance(field.data, str):
        raise RuntimeError(f"form field {field.name!r} read before the form validated")
    return field.data


class ConsoleForm(FlaskForm):
    """A console form: it carries the console's CSRF token whatever the host's Flask-WTF
    settings are (jobwarden.console.web.security checks it on every POST)."""

    class Meta:
        csrf_field_name = "csrf_token"  # jobwarden.console.web.security.CSRF_FIELD

        @property
        def csrf(self) -> bool:
            return bool(settings()["CSRF_ENABLED"])


class LoginForm(ConsoleForm):
    username = StringField("User name", validators=[DataRequired(), Length(max=100)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=1000)])


class LogoutForm(ConsoleForm):
    """Only its CSRF token: signing out is a POST."""


class ActionForm(ConsoleForm):
    """An operator action on one job: the reason is required and goes to the audit log.

    `request_id` is minted when the form is rendered, so a double-click or a resubmitted
    form is recognised and acts once. `expected_status` is the status the operator saw,
    and `seen_retried_at` when the job had last been retried (`never`): if the job moved
    on meanwhile, or was retried and came back to that status, the action is refused
    instead of surprising anyone.
    """

    reason = TextAreaField("Reason", validators=[DataRequired(), Length(max=REASON_MAX)])
    request_id = HiddenField(validators=[DataRequired(), Length(max=64)])
    expected_status = HiddenField(validators=[Optional(), AnyOf(JOB_STATUSES)])
    seen_retried_at = HiddenField(validators=[Optional(), Length(max=40)])

    @classmethod
    def fresh(cls, expected_status: str | None = None, *,
              retried_at: datetime | None = None) -> ActionForm:
        """A form for a job seen in `expected_status`, last retried at `retried_at` (None:
        never): both are what the action checks."""
        form = cls(formdata=None)
        form.request_id.data = uuid.uuid4().hex
        form.expected_status.data = expected_status or ""
        if expected_status:
            form.seen_retried_at.data = retried_at.isoformat() if retried_at else "never"
        return form

    def seen_retried(self) -> datetime | None:
        """When the job had last been retried as the operator saw it (RETRIED_NEVER: not
        at all; None: the form did not say). ValueError for anything else."""
        seen = (self.seen_retried_at.data or "").strip()
        if not seen:
            return None
        if seen == "never":
            return RETRIED_NEVER
        when = datetime.fromisoformat(seen)
        if when.utcoffset() is None:
            raise ValueError("a time without its offset")
        return when


DEPENDENTS_PROBLEM = (f"Choose what becomes of its dependents: {', '.join(DEPENDENTS_CHOICES)}. "
                      "Nothing was changed.")


def dependents_choice(form: Mapping[str, str]) -> str | None:
    """The operator's `dependents` choice on a cancel or skip form: "hold" when the form
    offered none (no job waited when it was drawn), None when it names no choice."""
    choice = form.get("dependents") or "hold"
    return choice if choice in DEPENDENTS_CHOICES else None


class LimitForm(ActionForm):
    """Set a queue's or a type's live limit: a maximum concurrency, a rate ("100/s",
    "600/m") and its burst, any of them left empty; the reason goes to the audit log.
    jobwarden.worker.ops.operations.set_limit checks the values and says what is wrong."""

    max_concurrency = IntegerField(validators=[Optional(), NumberRange(min=0, max=100_000)])
    rate = StringField(validators=[Optional(), Length(max=40)])
    burst = IntegerField(validators=[Optional(), NumberRange(min=1, max=100_000)])


# The select fields' choices are bare values, labelled by themselves: WTForms deprecates
# (value, label) tuples from 3.3 on, and types-WTForms 3.2 knows only those ("bare values").
class UserForm(ConsoleForm):
    """Add or reset a user; names and passwords are checked by
    jobwarden.console.core.account_policy, the same functions `jobwarden user add` calls."""

    username = StringField("User name", validators=[DataRequired(), Length(max=400)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=1000)])
    role = SelectField("Role", choices=list(ROLES),  # type: ignore[arg-type]  # bare values
                       validators=[AnyOf(ROLES)])


#: An account's access, as the users page offers it.
ACCESS = ("enabled", "disabled")


class UserAccessForm(ConsoleForm):
    role = SelectField("Role", choices=list(ROLES),  # type: ignore[arg-type]  # bare values
                       validators=[AnyOf(ROLES)])
    access = SelectField("Access", choices=list(ACCESS))  # type: ignore[arg-type]  # bare values


class TargetForm(ActionForm):
    """Add or edit a notification target (admins; jobwarden.worker.ops.notify_targets
    checks the values and says what is wrong). Its secrets (URL, signing secret, SMTP
    password) are never rendered back: left empty on an edit, the stored ones stay."""

    name = StringField(validators=[Optional(), Length(max=100)])
    kind = SelectField(choices=list(TARGET_KINDS),  # type: ignore[arg-type]  # bare values
                       validators=[Optional(), AnyOf(TARGET_KINDS)])
    url = PasswordField(validators=[Optional(), Length(max=2000)])
    secret = PasswordField(validators=[Optional(), Length(max=500)])
    format = SelectField(choices=list(FORMATS),  # type: ignore[arg-type]  # bare values
                         validators=[Optional(), AnyOf(FORMATS)])
    smtp_host = StringField(validators=[Optional(), Length(max=253)])
    smtp_port = IntegerField(validators=[Optional(), NumberRange(min=1, max=65535)])
    smtp_user = StringField(validators=[Optional(), Length(max=200)])
    smtp_password = PasswordField(validators=[Optional(), Length(max=500)])
    starttls = BooleanField(default=True)
    email_from = StringField(validators=[Optional(), Length(max=254)])
    email_to = StringField(validators=[Optional(), Length(max=6000)])
    revision = HiddenField(validators=[Optional(), Length(max=12)])
    clear_secret = BooleanField()


class ScheduleForm(ActionForm):
    """Add or edit a schedule (admins; jobwarden.worker.ops.schedule_edits checks the
    values as the worker does and says what is wrong). `job_type` names the type on an
    add; `revision` is the one the admin saw, on an edit or a removal."""

    job_type = StringField(validators=[Optional(), Length(max=200)])
    cron = StringField(validators=[Optional(), Length(max=200)])
    timezone = StringField(validators=[Optional(), Length(max=64)])
    catch_up = BooleanField()
    # The request itself is bounded (MAX_CONTENT_LENGTH); the payload's own bound is the
    # enqueue's (max_payload_bytes), checked on save.
    payload = TextAreaField(validators=[Optional()])
    revision = HiddenField(validators=[Optional(), Length(max=12)])
