"""Jobwarden's operations console (Flask): `create_app()` is the app factory.

Server-rendered pages with HTMX fragments that refresh themselves; every page needs a
login, every POST a CSRF token, every action the operator role and a reason.
"""

from __future__ import annotations

import logging
from pathlib import Path

from flask import Flask, render_template
from flask_wtf.csrf import CSRFError, CSRFProtect
from sqlalchemy.exc import DBAPIError, OperationalError

csrf = CSRFProtect()
log = logging.getLogger("jobwarden.console")


def create_app(config: dict | None = None) -> Flask:
    """Build the console. `config` overrides settings read from the environment."""
    from console import auth, formatting, security
    from console.config import load_config, secret_key
    from console.database import ConsoleDatabase
    from console.views import register_blueprints

    app = Flask(
        __name__,
        template_folder=str(resource_dir("templates")),
        static_folder=str(resource_dir("static")),
        static_url_path="/static",
    )
    app.config.update(load_config())
    app.config.update(config or {})
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = secret_key()

    # The console's own log lines are redacted wherever the server sends them.
    from worker.sanitize import RedactingFilter

    for logger in (log, app.logger):
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
    app.extensions["jobwarden_db"] = ConsoleDatabase(
        app.config.get("DATABASE_URL"), pool_size=app.config.get("DB_POOL_SIZE", 5))
    csrf.init_app(app)
    security.install(app)
    formatting.install(app)
    auth.login_manager.init_app(app)
    app.before_request(auth.require_login_everywhere)
    register_blueprints(app)
    _register_error_pages(app)

    @app.context_processor
    def console_globals():
        from console.forms import LogoutForm

        return {"logout_form": LogoutForm(), "config_poll": app.config["OVERVIEW_POLL_SECONDS"]}

    return app


def resource_dir(name: str) -> Path:
    """The console's `templates` or `static` folder, installed or in the source tree.

    A wheel carries them inside the package (pyproject.toml's force-include); the
    repository keeps them at its top level, where an editable install finds them.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise RuntimeError(f"the console's {name}/ folder is missing: reinstall jobwarden")


def _register_error_pages(app: Flask) -> None:
    from console.database import Q
    from worker.queries import describe_db_error

    def page(code: int, title: str, message: str, plain: bool = False):
        if plain:
            # render_template runs the context processors, and Flask-Login's loads the
            # signed-in user from the database: the very thing that is down.
            html = app.jinja_env.get_template("error.html").render(
                code=code, title=title, message=message, plain=True)
            return html, code
        return render_template("error.html", code=code, title=title, message=message), code

    @app.errorhandler(CSRFError)
    def csrf_failed(error):
        return page(400, "Form expired or not from this console",
                    "The request had no valid CSRF token, so nothing was changed. "
                    "Reload the page and try again.")

    @app.errorhandler(400)
    def bad_request(error):
        return page(400, "Bad request", "The request was malformed (for instance, it held a "
                                        "NUL character), so nothing was read or changed.")

    @app.errorhandler(403)
    def forbidden(error):
        return page(403, "Not allowed", "Your role does not allow this. Nothing was changed.")

    @app.errorhandler(404)
    def not_found(error):
        return page(404, "Not found", "There is nothing at this address.")

    @app.errorhandler(401)
    def unauthorized(error):
        return page(401, "Sign in required", "Sign in to use the console.")

    @app.errorhandler(DBAPIError)
    def database_error(error):
        # Logged as class, SQLSTATE and statement name only: no message, no traceback,
        # no parameters (PostgreSQL's DETAIL may quote a password hash or a key).
        log.error("database error: %s", describe_db_error(error, Q),
                  extra={"action": "db_error"})
        return page(500, "Database error", "PostgreSQL refused the request, so nothing was "
                                           "changed. The console's log names the statement.")

    @app.errorhandler(OperationalError)
    def database_unavailable(error):
        # During an incident the database may be the thing that is down: say so plainly.
        # htmx leaves a polling panel as it was on an error status, so pages stay readable.
        log.warning("database unavailable: %s", describe_db_error(error, Q),
                    extra={"action": "db_unavailable"})
        return page(503, "Database unavailable",
                    "The console cannot reach PostgreSQL right now, so nothing was read or "
                    "changed. Jobs are safe in the database; retry in a moment.", plain=True)
