"""The console's error pages, for its own requests only (the host keeps its own)."""

from __future__ import annotations

import logging

from flask import Blueprint, render_template
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import DBAPIError, OperationalError

from console.database import Q
from worker.queries import describe_db_error
from worker.sanitize import RedactingFilter

log = logging.getLogger("jobwarden.console")
# The console's own log lines are redacted wherever the server sends them.
if not any(isinstance(f, RedactingFilter) for f in log.filters):
    log.addFilter(RedactingFilter())


def page(code: int, title: str, message: str, plain: bool = False):
    """The console's error page; `plain` renders it without the signed-in header, for
    when the database (which the header's user came from) is what failed."""
    return render_template("jobwarden/error.html", code=code, title=title,
                           message=message, plain=plain), code


def install(bp: Blueprint) -> None:
    """Blueprint-scoped handlers: they answer errors raised while serving the console."""

    @bp.errorhandler(CSRFError)
    def csrf_failed(error):
        return page(400, "Form expired or not from this console",
                    "The request had no valid CSRF token, so nothing was changed. "
                    "Reload the page and try again.")

    @bp.errorhandler(400)
    def bad_request(error):
        return page(400, "Bad request", "The request was malformed (for instance, it held a "
                                        "NUL character), so nothing was read or changed.")

    @bp.errorhandler(403)
    def forbidden(error):
        return page(403, "Not allowed", "Your role does not allow this. Nothing was changed.")

    @bp.errorhandler(404)
    def not_found(error):
        return page(404, "Not found", "There is nothing at this address.")

    @bp.errorhandler(401)
    def unauthorized(error):
        return page(401, "Sign in required", "Sign in to use the console.")

    @bp.errorhandler(DBAPIError)
    def database_error(error):
        # Logged as class, SQLSTATE and statement name only: no message, no traceback,
        # no parameters (PostgreSQL's DETAIL may quote a password hash or a key).
        log.error("database error: %s", describe_db_error(error, Q),
                  extra={"action": "db_error"})
        # Plain: the header's counts are read from the same database, and would raise
        # again while the error page renders (a missing table, a revoked grant).
        return page(500, "Database error", "PostgreSQL refused the request, so nothing was "
                                           "changed. The console's log names the statement.",
                    plain=True)

    @bp.errorhandler(OperationalError)
    def database_unavailable(error):
        # During an incident the database may be the thing that is down: say so plainly.
        # htmx leaves a polling panel as it was on an error status, so pages stay readable.
        log.warning("database unavailable: %s", describe_db_error(error, Q),
                    extra={"action": "db_unavailable"})
        return page(503, "Database unavailable",
                    "The console cannot reach PostgreSQL right now, so nothing was read or "
                    "changed. Jobs are safe in the database; retry in a moment.", plain=True)
