"""The JOBWARDEN_* settings: each variable declared once, with its type, default and help
text, validated by pydantic.

`WorkerSettings` holds the runtime's (every command, the worker, `enqueue` in an
application); the console's settings extend it (console/core/config.py). A value that
does not read is a `SettingsError`: one line naming the variable and what is wrong, which
every `jobwarden` command prints before it starts (exit status 2), never a silent default.
A variable set but empty counts as unset. DATABASE_URL is not here: it is checked by
jobwarden.worker.store.db.parse_url, which reads every database URL.

docs/reference/configuration.md is generated from these classes (tests/docs_tables.py).
"""

from __future__ import annotations

import functools
import os
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
)

from jobwarden.worker.core.durations import PositiveDuration, shown
from jobwarden.worker.core.retention_policy import RetentionPolicy

PREFIX = "JOBWARDEN_"
#: The log levels a command takes (--log-level, JOBWARDEN_LOG_LEVEL).
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class SettingsError(ValueError):
    """A JOBWARDEN_* variable that does not read, said in one line that names it."""


def env_name(field: str) -> str:
    """The environment variable of a setting: `stale_after` -> JOBWARDEN_STALE_AFTER."""
    return PREFIX + field.upper()


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
        Path(".jobwarden"),
        description="Where the embedded PostgreSQL (used when DATABASE_URL is unset) and "
                    "the console's generated secret key live.")
    log_level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] | None,
                         BeforeValidator(_upper)] = Field(
        None, description="The default of `--log-level` (INFO; WARNING for the demo).")
    log_format: Literal["text", "json"] = Field(
        "text", description="The default of `--log-format`: `json` prints one object per "
                            "line with a stable `action` (Metrics and alerts, §4).")
    retention: Annotated[RetentionPolicy | None, PlainValidator(_retention)] = Field(
        default_factory=RetentionPolicy, json_schema_extra={"kind": "ages by status, or `off`"},
        description="How long the worker keeps finished jobs: ages over the defaults "
                    "(`completed=7d,failed=180d`), `executions=` for the execution "
                    "history (by default the longest of the ages, and never shorter), "
                    "or `off`.")
    duty_interval: PositiveDuration | None = Field(
        None, description="How long between the worker's schedule, policy and retention "
                          "passes, for tests and demos (unset: 5 s for schedules and "
                          "policies, 60 s for retention, an hour for partitions).")
    pooler: Annotated[Literal["transaction"] | None, BeforeValidator(_pooler)] = Field(
        None, description="`transaction` when DATABASE_URL goes through a "
                          "transaction-pooling PgBouncer: no server-side prepared "
                          "statements, and LISTEN only through `JOBWARDEN_LISTEN_URL`.")
    listen_url: str | None = Field(
        None, json_schema_extra={"kind": "PostgreSQL URL"},
        description="A direct connection for the worker's LISTEN past the pooler "
                          "(checked as DATABASE_URL is); without it a pooled worker polls.")
    max_payload_bytes: int = Field(
        64 * 1024, ge=1, le=2**30,
        description="The largest payload `enqueue` accepts, as JSON bytes.")
    max_result_bytes: int = Field(
        64 * 1024, ge=1, le=2**30,
        description="The largest result a handler may return, as JSON bytes; over it the "
                    "job fails with `RESULT_TOO_LARGE`.")
