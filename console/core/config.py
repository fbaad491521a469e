"""The console's configuration, read from the environment in one place, and read back
during a request (`settings()`, `mounted()`).

Every setting can also be passed to `create_app(config)` (tests do) or to
`Console(settings=...)`. Durations are in
seconds; SLA targets use the registry's notation (`30s`, `5m`, `1h`).

The bottom layer of the console: it imports nothing of the console, so that every other
module may import it (docs/architecture.md, "Console layers").
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from flask import current_app

from jobwarden.worker.store.db import jobwarden_home

#: Where jobwarden.console.mount keeps the mounted Console in `app.extensions`.
EXTENSION = "jobwarden_console"
#: Defaults of the sign-in throttle's settings (console/web/login_throttle.py), each
#: overridable by JOBWARDEN_<name> in the environment.
LOGIN_THROTTLE_DEFAULTS = {
    "LOGIN_ACCOUNT_FREE_FAILURES": 5,
    "LOGIN_ACCOUNT_LOCK_MAX_SECONDS": 60,
    "LOGIN_ADDRESS_FREE_FAILURES": 20,
    "LOGIN_ADDRESS_LOCK_MAX_SECONDS": 900,
    "LOGIN_FAILURE_WINDOW_SECONDS": 900,
}

#: Where the alerts' runbooks are when JOBWARDEN_RUNBOOK_URL does not say: the operating
#: guide's page, as a path into the repository or the installed docs.
RUNBOOKS = "docs/guide/operating.md"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str | float | int | None) -> float | None:
    """Seconds from '30s', '5m', '1h', '250ms' or a bare number; None if empty/invalid."""
    if text is None or text == "":
        return None
    if isinstance(text, int | float):
        return float(text)
    match = _DURATION.match(str(text))
    if not match:
        return None
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_sla_targets(text: str | None) -> dict[str, float]:
    """`send_email=30s,resize_image=2m` -> {"send_email": 30.0, "resize_image": 120.0}."""
    targets: dict[str, float] = {}
    for item in (text or "").split(","):
        name, _, value = item.partition("=")
        seconds = parse_duration(value)
        if name.strip() and seconds is not None:
            targets[name.strip()] = seconds
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


def _env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def secret_key() -> str:
    """JOBWARDEN_SECRET_KEY, or a key generated once and kept under JOBWARDEN_HOME.

    A persisted key lets every gunicorn worker (and a restart) read the same sessions.
    """
    key = os.environ.get("JOBWARDEN_SECRET_KEY")
    if key:
        return key
    path = jobwarden_home() / "console_secret_key"
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
    create_app(config) override them). They live on the Console, not in app.config, so a
    host application's configuration keeps its own meaning."""
    return {
        "DATABASE_URL": os.environ.get("DATABASE_URL"),
        "SLA_TARGETS": parse_sla_targets(os.environ.get("JOBWARDEN_SLA")),
        "SLA_DEFAULT_SECONDS": parse_duration(os.environ.get("JOBWARDEN_SLA_DEFAULT")),
        "STALE_HEARTBEAT_SECONDS": parse_duration(os.environ.get("JOBWARDEN_STALE_AFTER")) or 30,
        "WORKER_GONE_SECONDS": parse_duration(os.environ.get("JOBWARDEN_WORKER_GONE_AFTER")) or 60,
        "METRICS_TOKEN": os.environ.get("JOBWARDEN_METRICS_TOKEN") or None,
        # The address people open the console at (scheme, host and mount path), for the
        # links alerts carry (jobwarden.console.views.metrics, jobwarden_console_info); unset, the
        # console's path alone (relative links: never a request's Host). And where the
        # alerts' runbooks are read.
        "EXTERNAL_URL": external_url(os.environ.get("JOBWARDEN_CONSOLE_URL")),
        "RUNBOOK_URL": (os.environ.get("JOBWARDEN_RUNBOOK_URL") or "").strip() or RUNBOOKS,
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
        **login_throttle_settings(),
    }


def standalone_config() -> dict[str, Any]:
    """Flask settings of the standalone console's own app (create_app): a host that mounts
    the console keeps its own cookies, proxy handling and limits."""
    return {
        "TRUST_PROXY": _env_flag("JOBWARDEN_TRUST_PROXY"),
        "SESSION_COOKIE_SECURE": _env_flag("JOBWARDEN_COOKIE_SECURE"),
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_NAME": "jobwarden_session",
        "PERMANENT_SESSION_LIFETIME": 12 * 3600,
        "WTF_CSRF_TIME_LIMIT": 12 * 3600,
        "WTF_CSRF_SSL_STRICT": True,
        "MAX_CONTENT_LENGTH": 64 * 1024,
    }


def login_throttle_settings() -> dict[str, int]:
    """JOBWARDEN_LOGIN_* overrides of the sign-in throttle's defaults."""
    found = {}
    for name, default in LOGIN_THROTTLE_DEFAULTS.items():
        value = os.environ.get("JOBWARDEN_" + name)
        found[name] = int(value) if value and value.isdigit() else default
    return found


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
