"""The console's configuration, read from the environment in one place, and read back
during a request (`settings()`, `mounted()`).

The JOBWARDEN_* variables are declared in `ConsoleSettings`, which extends the runtime's
(worker/core/settings.py): a value that does not read is a SettingsError naming the
variable, at start-up. Every setting can also be passed to `create_app(config)` (tests do)
or to `Console(settings=...)`; durations there are in seconds.

The bottom layer of the console: it imports nothing of the console, so that every other
module may import it (docs/architecture.md, "Console layers").
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Protocol

from flask import current_app
from pydantic import AfterValidator, Field, SecretStr

from jobwarden.worker.core.durations import PositiveDuration
from jobwarden.worker.core.settings import NotifySettings, WorkerSettings
from jobwarden.worker.core.settings import external_url as external_url
from jobwarden.worker.core.settings import parse_sla_targets as parse_sla_targets

#: Where jobwarden.console.mount keeps the mounted Console in `app.extensions`.
EXTENSION = "jobwarden_console"

#: Where the alerts' runbooks are when JOBWARDEN_RUNBOOK_URL does not say: the operating
#: guide's page, as a path into the repository or the installed docs.
RUNBOOKS = "docs/guide/operating.md"


def _runbooks(value: str) -> str:
    return value.strip() or RUNBOOKS


#: What a trace link's template must hold: the place the job's trace id goes.
TRACE_ID = "{trace_id}"


def _trace_url(value: str | None) -> str | None:
    """A trace viewer's link template: an absolute http(s) URL with `{trace_id}` in it
    (the only placeholder; the id is 32 hex digits, so it needs no quoting)."""
    value = (value or "").strip()
    if not value:
        return None
    if TRACE_ID not in value or not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", value):
        raise ValueError("the trace link must be an absolute http(s) URL holding "
                         f"{TRACE_ID}, such as https://tempo.example.com/trace/{TRACE_ID}, "
                         f"not {value!r}")
    if value.replace(TRACE_ID, "").count("{") or value.replace(TRACE_ID, "").count("}"):
        raise ValueError(f"the trace link may hold no placeholder but {TRACE_ID}")
    return value


class ConsoleSettings(WorkerSettings, NotifySettings):
    """The console's settings: the runtime's, the notifications' (it shows and tests
    the targets, and its links start with JOBWARDEN_CONSOLE_URL), and its own."""

    secret_key: SecretStr | None = Field(
        None, description="Signs the standalone console's sessions and CSRF tokens; unset, "
                          "a key is generated once under `JOBWARDEN_HOME` (a mounted "
                          "console uses its host's `SECRET_KEY`).")
    metrics_token: SecretStr | None = Field(
        None, description="The bearer token a Prometheus scraper sends to `/metrics`.")
    console_read_url: SecretStr | None = Field(
        None, json_schema_extra={"kind": "PostgreSQL URL"},
        description="A streaming replica (hot standby) of DATABASE_URL's server, for the "
                    "console's pages of figures (counts, trends, SLA, search, lists); "
                    "every action, sign-in and preview stays on DATABASE_URL. Pages that "
                    "read it show its lag; unreachable, behind your last action or too far "
                    "behind, they read DATABASE_URL and say so. One that is not a standby "
                    "of that database is refused at start.")
    console_read_max_lag: PositiveDuration = Field(
        30.0, description="Past this lag the console's pages read DATABASE_URL instead "
                          "of `JOBWARDEN_CONSOLE_READ_URL` (and say why).")
    console_trace_url: Annotated[str | None, AfterValidator(_trace_url)] = Field(
        None, json_schema_extra={"kind": "URL template"},
        description="A job page links to its trace there: an http(s) URL with "
                    "`{trace_id}` in it (e.g. `https://tempo.example.com/trace/{trace_id}`)"
                    ", for jobs enqueued in a trace (docs/guide/traces.md).")
    runbook_url: Annotated[str, AfterValidator(_runbooks)] = Field(
        RUNBOOKS, json_schema_extra={"kind": "URL or path"},
        description="Where the alerts' `runbook_url` links point: the operating "
                              "guide's alert runbooks, as your team reads them.")
    stale_after: PositiveDuration = Field(
        30.0, description="A running job whose heartbeat is older than this is shown as "
                          "stale.")
    worker_gone_after: PositiveDuration = Field(
        60.0, description="A worker silent for this long is shown as gone.")
    trust_proxy: bool = Field(
        False, description="Behind a TLS-terminating proxy: trust its `X-Forwarded-*` "
                           "headers (standalone console).")
    cookie_secure: bool = Field(
        False, description="Session cookies are always `Secure` (standalone console; "
                           "they are over HTTPS anyway).")
    login_account_free_failures: int = Field(
        5, ge=0, le=1000,
        description="Failed sign-ins to one account before it is throttled.")
    login_account_lock_max_seconds: int = Field(
        60, ge=1, le=86_400,
        description="Longest lock of a throttled account, in seconds; locks double from "
                    "1 s.")
    login_address_free_failures: int = Field(
        20, ge=0, le=100_000,
        description="Failed sign-ins from one address before it is throttled.")
    login_address_lock_max_seconds: int = Field(
        900, ge=1, le=86_400,
        description="Longest lock of a throttled address, in seconds.")
    login_failure_window_seconds: int = Field(
        900, ge=1, le=30 * 86_400,
        description="Failed sign-ins older than this many seconds are forgotten.")


#: The sign-in throttle's settings (console/web/login_throttle.py) and their defaults.
LOGIN_THROTTLE_DEFAULTS: dict[str, int] = {
    name.upper(): field.default for name, field in ConsoleSettings.model_fields.items()
    if name.startswith("login_")}


def secret_key() -> str:
    """JOBWARDEN_SECRET_KEY, or a key generated once and kept under JOBWARDEN_HOME.

    A persisted key lets every gunicorn worker (and a restart) read the same sessions.
    """
    env = ConsoleSettings.load()
    if env.secret_key is not None:
        return env.secret_key.get_secret_value()
    path = env.home.resolve() / "console_secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(48)
    # O_EXCL: when two workers race, one writes and the other reads the winner's key.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return Path(path).read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(key)
    return key


def load_settings() -> dict[str, Any]:
    """The console's own settings, from the environment (Console(settings=...) and
    create_app(config) override them); SettingsError names a variable that does not
    read. They live on the Console, not in app.config, so a host application's
    configuration keeps its own meaning."""
    env = ConsoleSettings.load()
    return {
        "DATABASE_URL": os.environ.get("DATABASE_URL"),
        # A standby for the pages' reads (console/data/replica.py, console/web/reads.py).
        "READ_URL": (env.console_read_url.get_secret_value()
                     if env.console_read_url else None),
        "READ_MAX_LAG_SECONDS": env.console_read_max_lag,
        # How long a standby that could not be reached is left alone before it is tried
        # again: a page waits on a dead host's connect timeout at most once in this time.
        "READ_RETRY_SECONDS": 5.0,
        "SLA_TARGETS": env.sla,
        "SLA_DEFAULT_SECONDS": env.sla_default,
        "STALE_HEARTBEAT_SECONDS": env.stale_after,
        "WORKER_GONE_SECONDS": env.worker_gone_after,
        "METRICS_TOKEN": env.metrics_token.get_secret_value() if env.metrics_token else None,
        # The address people open the console at (scheme, host and mount path), for the
        # links alerts carry (jobwarden.console.views.metrics, jobwarden_console_info); unset, the
        # console's path alone (relative links: never a request's Host). And where the
        # alerts' runbooks are read.
        "EXTERNAL_URL": env.console_url,
        "RUNBOOK_URL": env.runbook_url,
        # A trace viewer's link for jobs enqueued in a trace (docs/guide/traces.md).
        "TRACE_URL": env.console_trace_url,
        "PAGE_SIZE": 50,
        "PAGE_SIZE_MAX": 200,
        "OVERVIEW_POLL_SECONDS": 5,
        "JOB_POLL_SECONDS": 2,
        # Jobs per chunk of a bulk action (one transaction each, console/data/bulk.py).
        "BULK_CHUNK_SIZE": 1000,
        # How long storing a selection may take: the request must answer before the web
        # server's own timeout (gunicorn's default is 30 s).
        "BULK_SELECT_SECONDS": 20.0,
        # Jobs one payload or error-text search scans (console/data/search.py).
        "SEARCH_WINDOW": 100_000,
        # How long one search statement may run (seconds): one window of error texts
        # took 2-5 s at 500,000 jobs; past this the search stops and says so.
        "SEARCH_SECONDS": 10.0,
        # Whether the console owns the whole session (standalone) or shares the host's.
        "OWNS_SESSION": False,
        # The CSRF check on the console's POSTs (jobwarden.console.web.security): off only
        # for tests; a host's WTF_CSRF_* settings never change it.
        "CSRF_ENABLED": True,
        **{name: getattr(env, name.lower()) for name in LOGIN_THROTTLE_DEFAULTS},
    }


def standalone_config() -> dict[str, Any]:
    """Flask settings of the standalone console's own app (create_app): a host that mounts
    the console keeps its own cookies, proxy handling and limits."""
    env = ConsoleSettings.load()
    return {
        "TRUST_PROXY": env.trust_proxy,
        "SESSION_COOKIE_SECURE": env.cookie_secure,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_NAME": "jobwarden_session",
        "PERMANENT_SESSION_LIFETIME": 12 * 3600,
        "WTF_CSRF_TIME_LIMIT": 12 * 3600,
        "WTF_CSRF_SSL_STRICT": True,
        "MAX_CONTENT_LENGTH": 64 * 1024,
    }


#: A host's `user_loader`: the signed-in user as (name, role), or None.
UserLoader = Callable[[], "tuple[str, str] | None"]


class MountedConsole(Protocol):
    """What a request reads of the mounted console (jobwarden.console.mount.Console is one): its
    settings and who signs users in. Declared here, so that the modules reading it name
    nothing above the settings layer (and jobwarden.console.mount imports this module, not the
    other way round)."""

    settings: dict[str, Any]
    user_loader: UserLoader | None
    login_view: str | None
    #: The host's pages the top bar links to: its home, its sign-out (endpoints).
    home_view: str | None
    home_label: str
    logout_view: str | None
    url_prefix: str

    @property
    def own_login(self) -> bool: ...


def mounted() -> MountedConsole:
    """The Console mounted in the current app (jobwarden.console.mount)."""
    console: MountedConsole = current_app.extensions[EXTENSION]
    return console


def settings() -> dict[str, Any]:
    """The mounted console's settings (page sizes, SLA targets, polling intervals…)."""
    return mounted().settings
