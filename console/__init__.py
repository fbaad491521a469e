"""Jobwarden's operations console (Flask).

Server-rendered pages with HTMX fragments that refresh themselves; every page needs a
login, every POST a CSRF token, every action the operator role and a reason.

- `Console(app, url_prefix="/ops/jobs", user_loader=...)` mounts it in a host Flask app
  (jobwarden.console.mount).
- `safe_next_url(target, default)` is its rule for `next` addresses, for a host's own login
  to reuse (no open redirects).
- `create_app()` is the standalone console: a tiny app that mounts it at `/` with its own
  login (`jobwarden console`, gunicorn `jobwarden.console:create_app()`).
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask
from psycopg import OperationalError

from jobwarden.console.core.config import load_settings, secret_key, standalone_config
from jobwarden.console.core.resources import resource_dir
from jobwarden.console.mount import Console
from jobwarden.console.web import security
from jobwarden.console.web.security import safe_next_url
from jobwarden.worker.core.sanitize import RedactingFilter
from jobwarden.worker.store.db import check_database_schema, database_url

__all__ = ["Console", "create_app", "resource_dir", "safe_next_url"]

log = logging.getLogger("jobwarden.console")


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """The standalone console. `config` overrides settings read from the environment:
    Flask's (SECRET_KEY, TESTING, WTF_CSRF_ENABLED…) and the console's (console/core/config.py).

    A database behind this code (or without its tables) is refused here, with
    SchemaOutOfDate saying to run `jobwarden migrate`; `CHECK_SCHEMA: False` leaves that
    to the caller (the demo, which migrates after binding its port)."""
    app = Flask(__name__, static_folder=None, template_folder=None)
    app.config.update(standalone_config())
    app.config.update(config or {})
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = secret_key()
    security.install_standalone(app)
    # The standalone server's own log lines are redacted too (the console's are, mounted
    # or not: jobwarden.console.web.errors).
    if not any(isinstance(f, RedactingFilter) for f in app.logger.filters):
        app.logger.addFilter(RedactingFilter())
    own = {key: value for key, value in (config or {}).items() if key in load_settings()}
    # Standalone, the console is the only app: without DATABASE_URL it uses the embedded
    # PostgreSQL, like every other command (a mounted console must be told its database).
    url = own.pop("DATABASE_URL", None) or database_url()
    if (config or {}).get("CHECK_SCHEMA", True):
        _check_schema(url)
    # Standalone, the app's Flask-WTF switch is the console's: its only views are the
    # console's (tests and benchmarks turn CSRF off with it).
    own.setdefault("CSRF_ENABLED", bool(app.config.get("WTF_CSRF_ENABLED", True)))
    Console(app, url_prefix="", database_url=url, settings={**own, "OWNS_SESSION": True})
    return app



def _check_schema(url: str) -> None:
    """Refuse a database behind this code at start, rather than serve pages that fail on
    what it lacks; say so once when a newer Jobwarden migrated it. A database down now is
    not checked: the console starts, and its pages say the database is unavailable."""
    try:
        newer = check_database_schema(url)
    except OperationalError as exc:
        log.warning("the database's migration revision was not checked: %s",
                    " ".join(str(exc).split()), extra={"action": "schema_not_checked"})
        return
    if newer:
        log.warning("%s", newer, extra={"action": "schema_newer"})
