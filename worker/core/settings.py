"""The JOBWARDEN_* settings: each variable declared once, with its type, default and help
text, validated by pydantic.

`WorkerSettings` holds the runtime's (every command, the worker, `enqueue` in an
application); the console's settings extend it (console/core/config.py). A value that
does not read is a `SettingsError`: one line naming the variable and what is wrong, which
every `jobwarden` command prints before it starts (exit status 2), never a silent default.
A variable set but empty counts as unset. DATABASE_URL is not here: it is checked by
jobwarden.worker.store.db.parse_url, which reads every database URL.

`NotifySettings` holds the notifications' (docs/guide/notifications.md), which the
worker's notifier and the console both read; the console's settings extend it too.

The runtime reads them through worker/core/env.py, which gives a class's defaults without
loading this module (nor pydantic) while none of its variables is set; each field's
default is declared in worker/core/setting_defaults.py.

docs/reference/configuration.md is generated from these classes (tests/docs_tables.py).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    SecretStr,
    ValidationError,
    model_validator,
)

from jobwarden.worker.core import destinations
from jobwarden.worker.core.durations import POSITIVE, PositiveDuration, shown
from jobwarden.worker.core.retention_policy import RetentionPolicy
from jobwarden.worker.core.setting_defaults import LEVELS as LEVELS
from jobwarden.worker.core.setting_defaults import NOTIFY_DEFAULTS as NOTIFY
from jobwarden.worker.core.setting_defaults import PREFIX as PREFIX
from jobwarden.worker.core.setting_defaults import WORKER_DEFAULTS as WORKER
from jobwarden.worker.core.setting_defaults import SettingsError, env_name


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


def _pooler(value: Any) -> Any:
    text = value.strip().lower() if isinstance(value, str) else value
    return None if text == "none" else text


def _retention(value: Any) -> RetentionPolicy | None:
    if value is None or isinstance(value, RetentionPolicy):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{shown(value)} is not a retention policy")
    try:
        return RetentionPolicy.parse(value)
    except ValueError as exc:  # said after the variable's name: "retention: " says it twice
        raise ValueError(str(exc).removeprefix("retention: ")) from None


class Settings(BaseModel):
    """How every JOBWARDEN_* settings class reads the environment: each field from the
    variable its alias names (JOBWARDEN_STALE_AFTER for `stale_after`, exactly so: a
    lower-case variable is another variable, and the name in an error message is the one
    to fix), as text that the field's type validates (`a=30s,b=5m`, never JSON). A plain
    model reading os.environ itself, not pydantic-settings: every worker start and an
    application's first enqueue paid ~35 ms importing that package (and python-dotenv)
    for sources nothing here uses."""

    model_config = ConfigDict(alias_generator=env_name, populate_by_name=True,
                              extra="ignore", frozen=True, validate_default=True)

    #: The last read of each class and the values it was read from (see `current`).
    _last: ClassVar[dict[type, tuple[tuple[str | None, ...], Any]]] = {}

    @classmethod
    def load(cls) -> Self:
        """The settings the environment gives, or SettingsError naming each bad variable."""
        # `JOBWARDEN_SLA=${SLA}` left unfilled means unset, as it always has.
        given = {name: value for name in variables(cls) if (value := os.environ.get(name))}
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            raise SettingsError(one_line(exc, cls)) from None

    @classmethod
    def current(cls) -> Self:
        """`load()`, read again only when one of the class's variables changed (a test or
        a host may change the environment between two calls)."""
        key = tuple(map(os.environ.get, variables(cls)))
        last = cls._last.get(cls)
        if last is None or last[0] != key:
            last = (key, cls.load())
            cls._last[cls] = last
        settings: Self = last[1]
        return settings

    @classmethod
    def one(cls, name: str) -> Any:
        """The setting `name` of `load()`, read again only when its own variable changed:
        enqueue asks on every call, and each lookup of an unset variable costs
        microseconds (`current()` looks up all of them)."""
        key = (cls, name, os.environ.get(cls.model_fields[name].alias or name))
        if key not in _ONE:
            _ONE[key] = getattr(cls.load(), name)
        return _ONE[key]


#: Settings read one at a time (Settings.one), by class, name and their variable's value.
_ONE: dict[tuple[type, str, str | None], Any] = {}


@functools.cache
def variables(model: type[BaseModel]) -> tuple[str, ...]:
    """The environment variables a settings class reads, in the order of its fields."""
    return tuple(field.alias or name for name, field in model.model_fields.items())


def one_line(exc: ValidationError, model: type[BaseModel]) -> str:
    """Each error of `exc` as `VARIABLE: what is wrong`, joined in one line; a secret's
    value is never repeated."""
    secret = {field.alias for field in model.model_fields.values()
              if SecretStr in (field.annotation, *get_args(field.annotation))}
    parts = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else model.__name__
        message = error["msg"].removeprefix("Value error, ")
        if not error["loc"]:  # a check of several variables: it names them itself
            parts.append(" ".join(message.split()))
            continue
        message = message[:1].lower() + message[1:]
        given = error.get("input")
        # pydantic's own checks do not say what they were given; ours (value_error) do
        if error["type"] != "value_error" and name not in secret and isinstance(given, str):
            message += f" (got {shown(given)})"
        parts.append(f"{name}: {' '.join(message.split())}")
    return "; ".join(parts)


class WorkerSettings(Settings):
    """The runtime's settings: read by every `jobwarden` command, the worker, and
    `enqueue` in an application."""

    home: Path = Field(
        WORKER["home"],
        description="Where the embedded PostgreSQL (used when DATABASE_URL is unset) and "
                    "the console's generated secret key live.")
    log_level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] | None,
                         BeforeValidator(_upper)] = Field(
        WORKER["log_level"],
        description="The default of `--log-level` (INFO; WARNING for the demo).")
    log_format: Literal["text", "json"] = Field(
        WORKER["log_format"],
        description="The default of `--log-format`: `json` prints one object per "
                    "line with a stable `action` (Metrics and alerts, §4).")
    retention: Annotated[RetentionPolicy | None, PlainValidator(_retention)] = Field(
        WORKER["retention"], json_schema_extra={"kind": "ages by status, or `off`"},
        description="How long the worker keeps finished jobs: ages over the defaults "
                    "(`completed=7d,failed=180d`), `executions=` for the execution "
                    "history (by default the longest of the ages, and never shorter), "
                    "or `off`.")
    duty_interval: PositiveDuration | None = Field(
        WORKER["duty_interval"],
        description="How long between the worker's schedule, policy and retention "
                    "passes, for tests and demos (unset: 5 s for schedules and "
                    "policies, 60 s for retention, an hour for partitions).")
    pooler: Annotated[Literal["transaction"] | None, BeforeValidator(_pooler)] = Field(
        WORKER["pooler"], description="`transaction` when DATABASE_URL goes through a "
                          "transaction-pooling PgBouncer: no server-side prepared "
                          "statements, and LISTEN only through `JOBWARDEN_LISTEN_URL`.")
    listen_url: str | None = Field(
        WORKER["listen_url"], json_schema_extra={"kind": "PostgreSQL URL"},
        description="A direct connection for the worker's LISTEN past the pooler "
                          "(checked as DATABASE_URL is); without it a pooled worker polls.")
    max_payload_bytes: int = Field(
        WORKER["max_payload_bytes"], ge=1, le=2**30,
        description="The largest payload `enqueue` accepts, as JSON bytes.")
    max_result_bytes: int = Field(
        WORKER["max_result_bytes"], ge=1, le=2**30,
        description="The largest result a handler may return, as JSON bytes; over it the "
                    "job fails with `RESULT_TOO_LARGE`.")


def parse_sla_targets(text: object) -> dict[str, float]:
    """`send_email=30s,resize_image=2m` -> {"send_email": 30.0, "resize_image": 120.0};
    ValueError naming the entry that does not read."""
    if isinstance(text, dict):
        return {str(name): POSITIVE.parse(value) for name, value in text.items()}
    if not isinstance(text, str):
        raise ValueError(f"{shown(text)} is not a list of targets like send_email=30s")
    targets: dict[str, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue  # a trailing comma
        name, equals, value = (part.strip() for part in item.partition("="))
        if not name or not equals:
            raise ValueError(f"{shown(item.strip())} is not a job type's target like "
                             "send_email=30s")
        if name in targets:  # which of the two was meant is not ours to guess
            raise ValueError(f"{shown(name)} is given twice")
        try:
            targets[name] = POSITIVE.parse(value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return targets


def external_url(value: str | None) -> str | None:
    """The console's external address without its trailing slash, or None when unset;
    anything but an absolute http(s) URL is refused (the alerts' links would be broken)."""
    value = (value or "").strip()
    if not value:
        return None
    if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value):
        raise ValueError(f"the console's external URL must be an absolute http(s) address "
                         f"such as https://ops.example.com/jobs, not {value!r}")
    return value.rstrip("/")


def _webhook_url(value: Any) -> SecretStr | None:
    """The environment's webhook URL, checked (its host is not: see destinations)."""
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    if not isinstance(text, str):
        raise ValueError("a webhook URL is text")
    return SecretStr(destinations.check_webhook_url(text, console=False))


def _optional_address(value: Any) -> str | None:
    return None if value is None or not str(value).strip() else \
        destinations.check_address(str(value), "sender")


def _recipients(value: Any) -> tuple[str, ...]:
    if value is None or (isinstance(value, str) and not value.strip()) or value == ():
        return ()
    return destinations.check_addresses(value)


def _smtp_host(value: Any) -> str | None:
    if value is None or not str(value).strip():
        return None
    return destinations.check_smtp_host(str(value), console=False)


def _queue(value: Any) -> str:
    text = str(value).strip()
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}", text):
        raise ValueError(f"{shown(text)} is not a queue name (letters, digits, '_', '.', "
                         "':' or '-')")
    return text


class NotifySettings(Settings):
    """The notifications' settings (docs/guide/notifications.md): what the worker's
    notifier watches and where it sends, read by the worker and by the console."""

    console_url: Annotated[str | None, PlainValidator(external_url)] = Field(
        NOTIFY["console_url"], json_schema_extra={"kind": "absolute http(s) URL"},
        description="The address people open the console at, mount path included "
                          "(`https://shop.example.com/ops/jobs`; `Console(app, "
                          "external_url=...)` when mounted): the alerts' `console_url` "
                          "links and the notifications' links start with it. Unset: the "
                          "console's path alone, so the links are relative (a request's "
                          "Host is never used).")
    sla: Annotated[dict[str, float], PlainValidator(parse_sla_targets)] = Field(
        default_factory=lambda: dict(NOTIFY["sla"]),
        json_schema_extra={"kind": "`type=duration`, comma-separated"},
        description="Per-type SLA targets, `send_email=30s,export_report=5m`; each wins "
                    "over the handler's `@job(sla=...)`.")
    sla_default: PositiveDuration | None = Field(
        NOTIFY["sla_default"], description="The SLA target of the types that declare none.")
    notify_interval: PositiveDuration = Field(
        NOTIFY["notify_interval"],
        description="How often the worker's notifier looks at the rollups for what "
                    "to send (one worker at a time; `JOBWARDEN_DUTY_INTERVAL` "
                    "shortens it).")
    notify_period: PositiveDuration = Field(
        NOTIFY["notify_period"],
        description="At most one message per group (a code failing for a type, a "
                    "storm, a breach, held flows) per period: the first at once, "
                    "then one summary of what followed.")
    notify_queue: Annotated[str, PlainValidator(_queue)] = Field(
        NOTIFY["notify_queue"], json_schema_extra={"kind": "queue name"},
        description="The queue of the jobs that send the messages (`jobwarden.notify`); "
                    "only a worker serving it runs the notifier.")
    notify_allow_private: bool = Field(
        NOTIFY["notify_allow_private"],
        description="Let targets set in the console reach loopback and private "
                    "addresses (a webhook or SMTP relay inside your network); "
                    "link-local and cloud metadata addresses stay refused.")
    notify_webhook_url: Annotated[SecretStr | None, PlainValidator(_webhook_url)] = Field(
        NOTIFY["notify_webhook_url"], json_schema_extra={"kind": "secret http(s) URL"},
        description="A webhook every notification is posted to (JSON), beside the "
                    "targets set in the console.")
    notify_webhook_secret: SecretStr | None = Field(
        NOTIFY["notify_webhook_secret"],
        description="The key that signs the environment's webhook messages "
                    "(HMAC-SHA256 over the timestamp and the body).")
    notify_webhook_format: Literal["json", "slack"] = Field(
        NOTIFY["notify_webhook_format"],
        description="The environment webhook's body: Jobwarden's JSON, or "
                    "`slack` for an incoming webhook's `{\"text\": ...}`.")
    notify_smtp_host: Annotated[str | None, PlainValidator(_smtp_host)] = Field(
        NOTIFY["notify_smtp_host"], json_schema_extra={"kind": "host name or address"},
        description="An SMTP server every notification is mailed through, beside the "
                    "targets set in the console.")
    notify_smtp_port: int = Field(NOTIFY["notify_smtp_port"], ge=1, le=65535,
                                  description="The SMTP server's port.")
    notify_smtp_user: str | None = Field(
        NOTIFY["notify_smtp_user"],
        description="The SMTP user, when the server wants a login (over STARTTLS "
                    "only).")
    notify_smtp_password: SecretStr | None = Field(NOTIFY["notify_smtp_password"],
                                                   description="The SMTP password.")
    notify_smtp_starttls: bool = Field(
        NOTIFY["notify_smtp_starttls"],
        description="Upgrade the SMTP connection with STARTTLS, and send nothing "
                    "when the server cannot.")
    notify_email_from: Annotated[str | None, PlainValidator(_optional_address)] = Field(
        NOTIFY["notify_email_from"], json_schema_extra={"kind": "mail address"},
        description="The sender of the notification emails.")
    notify_email_to: Annotated[tuple[str, ...], PlainValidator(_recipients)] = Field(
        NOTIFY["notify_email_to"], json_schema_extra={"kind": "mail addresses, comma-separated"},
        description="Who the notification emails go to.")

    @model_validator(mode="after")
    def _an_email_target_is_whole(self) -> Self:
        given = {"JOBWARDEN_NOTIFY_SMTP_HOST": self.notify_smtp_host,
                 "JOBWARDEN_NOTIFY_EMAIL_FROM": self.notify_email_from,
                 "JOBWARDEN_NOTIFY_EMAIL_TO": self.notify_email_to}
        missing = [name for name, value in given.items() if not value]
        if 0 < len(missing) < len(given):
            raise ValueError(f"{', '.join(missing)}: needed as well, for mail "
                             f"through {', '.join(n for n in given if n not in missing)}")
        if self.notify_smtp_password is not None and not self.notify_smtp_starttls:
            raise ValueError("JOBWARDEN_NOTIFY_SMTP_PASSWORD: refused without "
                             "JOBWARDEN_NOTIFY_SMTP_STARTTLS (it would cross in clear)")
        if self.notify_webhook_secret is not None and self.notify_webhook_url is None:
            raise ValueError("JOBWARDEN_NOTIFY_WEBHOOK_SECRET: set without "
                             "JOBWARDEN_NOTIFY_WEBHOOK_URL")
        return self
