"""The console's error pages, for its own requests only (the host keeps its own)."""

from __future__ import annotations

import logging

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import DBAPIError, OperationalError

from jobwarden.console.data.database import CQ, describe, get_db
from jobwarden.worker.core.sanitize import RedactingFilter

log = logging.getLogger("jobwarden.console")
# The console's own log lines are redacted wherever the server sends them.
if not any(isinstance(f, RedactingFilter) for f in log.filters):
    log.addFilter(RedactingFilter())


def page(code: int, title: str, message: str, plain: bool = False) -> ResponseReturnValue:
    """The console's error page; `plain` renders it without the signed-in header, for
    when the database (which the header's user came from) is what failed."""
    try:
        return render_template("jobwarden/error.html", code=code, title=title,
                               message=message, plain=plain), code
    except DBAPIError as error:
        if plain:
            raise
        # The header's counts are read from the database: when it fails too (a 404 on a
        # database without Jobwarden's tables), that failure is the one to explain.
        return database_page(error)


#: PostgreSQL's undefined_table: a statement named a table this database does not have.
UNDEFINED_TABLE = "42P01"


def database_page(error: DBAPIError) -> ResponseReturnValue:
    """The plain page for a database error: unreachable, missing tables, or refused."""
    if isinstance(error, OperationalError):
        # During an incident the database may be the thing that is down: say so plainly.
        # htmx leaves a polling panel as it was on an error status, so pages stay readable.
        log.warning("database unavailable: %s", describe(error),
                    extra={"action": "db_unavailable"})
        return page(503, "Database unavailable",
                    "The console cannot reach PostgreSQL right now, so nothing was read or "
                    "changed. Jobs are safe in the database; retry in a moment.", plain=True)
    # Logged as class, SQLSTATE and statement name only: no message, no traceback,
    # no parameters (PostgreSQL's DETAIL may quote a password hash or a key).
    log.error("database error: %s", describe(error), extra={"action": "db_error"})
    if getattr(error.orig, "sqlstate", None) == UNDEFINED_TABLE:
        return _missing_tables_page()
    # Plain: the header's counts are read from the same database, and would raise
    # again while the error page renders (a revoked grant).
    return page(500, "Database error", "PostgreSQL refused the request, so nothing was "
                                       "changed. The console's log names the statement.",
                plain=True)


def _missing_tables_page() -> ResponseReturnValue:
    """A console pointed at a database nobody migrated (or at another database than the
    app's): name the database and the command, since the SQLSTATE alone tells nobody."""
    db = get_db()
    try:
        migrated = bool(db.row(CQ.console_schema_present)["present"])
    except DBAPIError:
        migrated = False
    where = db.where()
    state = (f"The database at {where} has Jobwarden tables older than this console"
             if migrated else f"The database at {where} has no Jobwarden tables")
    log.error("%s: run `jobwarden migrate`", state.removeprefix("The "),
              extra={"action": "db_not_migrated"})
    return page(500, "Jobwarden tables missing",
                f"{state}: run `jobwarden migrate` with DATABASE_URL set to it. If your "
                f"jobs are in another database, give the console that database's URL "
                f"(Console(app, database_url=...)).", plain=True)


def install(bp: Blueprint) -> None:
    """Blueprint-scoped handlers: they answer errors raised while serving the console."""

    @bp.errorhandler(CSRFError)
    def csrf_failed(error: Exception) -> ResponseReturnValue:
        return page(400, "Form expired or not from this console",
                    "The request had no valid CSRF token, so nothing was changed. "
                    "Reload the page and try again.")

    @bp.errorhandler(400)
    def bad_request(error: Exception) -> ResponseReturnValue:
        return page(400, "Bad request", "The request was malformed (for instance, it held a "
                                        "NUL character), so nothing was read or changed.")

    @bp.errorhandler(413)
    def too_large(error: Exception) -> ResponseReturnValue:
        # MAX_CONTENT_LENGTH: a pasted 10 MB payload, say; nothing of it is read
        return page(413, "Too large", "The form was larger than the console accepts, so "
                                      "nothing was read or changed.")

    @bp.errorhandler(403)
    def forbidden(error: Exception) -> ResponseReturnValue:
        return page(403, "Not allowed", "Your role does not allow this. Nothing was changed.")

    @bp.errorhandler(404)
    def not_found(error: Exception) -> ResponseReturnValue:
        return page(404, "Not found", "There is nothing at this address.")

    @bp.errorhandler(401)
    def unauthorized(error: Exception) -> ResponseReturnValue:
        return page(401, "Sign in required", "Sign in to use the console.")

    @bp.errorhandler(DBAPIError)
    def database_error(error: DBAPIError) -> ResponseReturnValue:
        return database_page(error)
