"""Where notifications go: webhooks and SMTP servers, set in the environment
(JOBWARDEN_NOTIFY_*, worker/core/settings.py) or in the console by an admin
(`job_notify_targets`). A target is named in a sending job's payload by its key, never
by its secrets: `env:webhook`, `env:email`, or a console target's id.

`check` is what a console target must pass before it is stored, and the sender checks
a stored one again (a row may have been written by hand).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobwarden.worker.core import destinations

if TYPE_CHECKING:  # the model: worker/core/env.py reads the settings without it
    from jobwarden.worker.core.settings import NotifySettings

WEBHOOK, EMAIL = "webhook", "email"
TARGET_KINDS = (WEBHOOK, EMAIL)
FORMATS = ("json", "slack")
ENV_WEBHOOK, ENV_EMAIL = "env:webhook", "env:email"
MAX_NAME_CHARS = 100
MAX_SECRET_CHARS = 500


@dataclass(frozen=True)
class Target:
    key: str
    name: str
    kind: str
    #: Set in the console: its host must pass the address policy (destinations).
    console: bool
    url: str | None = None
    secret: str | None = None
    format: str = "json"
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_user: str | None = None
    smtp_password: str | None = None
    starttls: bool = True
    email_from: str | None = None
    email_to: tuple[str, ...] = ()
    #: A console target's revision (what an edit compares and sets).
    revision: int = 0

    @property
    def shown_url(self) -> str:
        """The URL as the console shows it: scheme and host, the rest [REDACTED]."""
        return destinations.redact_url(self.url)


def env_targets(settings: NotifySettings) -> list[Target]:
    """The targets the environment sets (none, one or both)."""
    found = []
    if settings.notify_webhook_url is not None:
        found.append(Target(
            key=ENV_WEBHOOK, name="webhook (environment)", kind=WEBHOOK, console=False,
            url=settings.notify_webhook_url.get_secret_value(),
            secret=(settings.notify_webhook_secret.get_secret_value()
                    if settings.notify_webhook_secret else None),
            format=settings.notify_webhook_format))
    if settings.notify_smtp_host is not None and settings.notify_email_from:
        found.append(Target(
            key=ENV_EMAIL, name="email (environment)", kind=EMAIL, console=False,
            smtp_host=settings.notify_smtp_host, smtp_port=settings.notify_smtp_port,
            smtp_user=settings.notify_smtp_user,
            smtp_password=(settings.notify_smtp_password.get_secret_value()
                           if settings.notify_smtp_password else None),
            starttls=settings.notify_smtp_starttls, email_from=settings.notify_email_from,
            email_to=settings.notify_email_to))
    return found


def from_row(row: dict[str, Any]) -> Target:
    """A console target as `job_notify_targets` holds it."""
    return Target(
        key=str(row["id"]), name=row["name"], kind=row["kind"], console=True,
        url=row.get("url"), secret=row.get("signing_secret"), format=row.get("format") or "json",
        smtp_host=row.get("smtp_host"), smtp_port=row.get("smtp_port") or 587,
        smtp_user=row.get("smtp_user"), smtp_password=row.get("smtp_password"),
        starttls=bool(row.get("smtp_starttls", True)), email_from=row.get("email_from"),
        email_to=tuple(row.get("email_to") or ()), revision=row.get("revision") or 0)


def _text(value: object, what: str, limit: int, *, required: bool = False) -> str | None:
    text = "" if value is None else str(value).strip()
    if not text:
        if required:
            raise ValueError(f"a target needs a {what}")
        return None
    if len(text) > limit:
        raise ValueError(f"the {what} is longer than {limit} characters")
    if any(not ch.isprintable() for ch in text):
        raise ValueError(f"the {what} holds a control character")
    return text


def check(target: Target, *, allow_private: bool) -> Target:
    """`target` as it may be stored or sent, or ValueError saying what is wrong (never
    repeating a secret). A console target's host must pass the address policy."""
    name = _text(target.name, "name", MAX_NAME_CHARS, required=True) or ""
    if target.kind == WEBHOOK:
        url = destinations.check_webhook_url(target.url or "", console=target.console,
                                             allow_private=allow_private)
        if target.format not in FORMATS:
            raise ValueError(f"a webhook's format is one of {', '.join(FORMATS)}")
        secret = _text(target.secret, "signing secret", MAX_SECRET_CHARS)
        return Target(key=target.key, name=name, kind=WEBHOOK, console=target.console,
                      url=url, secret=secret, format=target.format,
                      revision=target.revision)
    if target.kind == EMAIL:
        host = destinations.check_smtp_host(target.smtp_host or "", console=target.console,
                                            allow_private=allow_private)
        port = target.smtp_port
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise ValueError("the SMTP port is a number from 1 to 65535")
        user = _text(target.smtp_user, "SMTP user", 200)
        password = _text(target.smtp_password, "SMTP password", MAX_SECRET_CHARS)
        if password is not None and not target.starttls:
            raise ValueError("a password is sent only over STARTTLS: turn it on, or give "
                             "no password")
        return Target(key=target.key, name=name, kind=EMAIL, console=target.console,
                      smtp_host=host, smtp_port=port, smtp_user=user, smtp_password=password,
                      starttls=target.starttls,
                      email_from=destinations.check_address(target.email_from or "", "sender"),
                      email_to=destinations.check_addresses(target.email_to),
                      revision=target.revision)
    raise ValueError(f"a target is a {' or an '.join(TARGET_KINDS)}")
