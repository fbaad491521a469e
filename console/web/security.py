"""Headers, request ids, CSRF and redirect checks that every console response goes through."""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import unquote, urlsplit

from flask import Blueprint, Flask, Response, abort, current_app, g, request, session
from flask.sessions import SecureCookieSessionInterface
from flask_htmx import HTMX
from flask_wtf.csrf import CSRFError, generate_csrf, same_origin, validate_csrf
from werkzeug.middleware.proxy_fix import ProxyFix
from wtforms import ValidationError

from jobwarden.console.core.config import settings

#: No inline scripts or styles anywhere: htmx and console.js come from static/.
CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "object-src 'none'",
))

#: Not init_app'ed on the host: the console reads htmx's request headers through it, and
#: adds nothing to the host's templates.
htmx = HTMX()
#: The console's CSRF token: its form field, its headers (htmx sends X-CSRFToken) and its
#: key in the session. The console's own, not read from the host's WTF_CSRF_* settings.
CSRF_FIELD = "csrf_token"
CSRF_HEADERS = ("X-CSRFToken", "X-CSRF-Token")
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_REQUEST_ID = re.compile(r"\A[A-Za-z0-9._:-]{1,64}\Z")
#: PostgreSQL's bigint: ids in routes beyond it are a 404, not an out-of-range error.
BIGINT_MAX = 2**63 - 1


def refuse_out_of_range_ids(endpoint: str | None, values: dict[str, Any] | None) -> None:
    """url_value_preprocessor: a route's integer beyond bigint, or written in other than
    ASCII digits, names nothing (404). Done
    for the console's routes only, not by replacing the app's `int` converter, which a
    host application's routes use too."""
    if values and any(isinstance(v, int) and v > BIGINT_MAX for v in values.values()):
        abort(404)
    # The `int` converter's \d reads any script's digits (`/jobs/١` would open job 1):
    # the console's ids are written in ASCII digits only.
    if (values and any(isinstance(v, int) for v in values.values())
            and any(c.isdigit() and not c.isascii() for c in request.path)):
        abort(404)


def refuse_nul_characters() -> None:
    """before_request: 400 for a NUL anywhere in the path, the query or the form.

    PostgreSQL cannot store or compare text with NUL, and no console field needs one; one
    check here covers every filter, form field and route argument, present and future."""
    values = [request.path, *request.args.keys(), *request.args.values()]
    if request.method == "POST" and request.mimetype in (
            "application/x-www-form-urlencoded", "multipart/form-data"):
        values += [*request.form.keys(), *request.form.values()]
    if any("\x00" in value for value in values):
        abort(400)


class SessionInterface(SecureCookieSessionInterface):
    """Marks the session cookie Secure whenever the request came over HTTPS."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config["SESSION_COOKIE_SECURE"] or request.is_secure)


def install_standalone(app: Flask) -> None:
    """The standalone console's app: the HTTPS-aware session cookie, and proxy headers
    when told to trust them. A host that mounts the console keeps its own."""
    app.session_interface = SessionInterface()
    if app.config.get("TRUST_PROXY"):
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]  # Flask's documented wrapping
            app.wsgi_app, x_for=1, x_proto=1, x_host=1)


def install(bp: Blueprint) -> None:
    """Request ids, the CSRF check and security headers, for the console's requests."""
    bp.url_value_preprocessor(refuse_out_of_range_ids)
    bp.before_request(assign_request_id)
    bp.before_request(refuse_nul_characters)
    bp.before_request(check_csrf)
    bp.after_request(security_headers)
    # The pages send it as htmx's X-CSRFToken header; forms carry their own field.
    bp.context_processor(lambda: {"csrf_token": console_csrf_token})
    # Forms that come back to the page they are on carry its address as `next`.
    bp.context_processor(lambda: {"this_page": this_page})


def assign_request_id() -> None:
    # A host that already gave the request an id keeps it: its logs and the audit agree.
    if "request_id" not in g:
        incoming = request.headers.get("X-Request-ID", "")
        g.request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex


def check_csrf() -> None:
    """Every POST to the console needs the session's CSRF token (form field or header).

    Checked here rather than by Flask-WTF's CSRFProtect, whose switches belong to the
    host: a host's WTF_CSRF_CHECK_DEFAULT, WTF_CSRF_ENABLED or WTF_CSRF_METHODS say how
    its own views are guarded, and never turn off the console's check. Only the console's
    setting CSRF_ENABLED does (a test's console)."""
    if request.method not in _UNSAFE_METHODS or not settings()["CSRF_ENABLED"]:
        return
    token = request.form.get(CSRF_FIELD) or next(
        (request.headers[h] for h in CSRF_HEADERS if request.headers.get(h)), None)
    try:
        validate_csrf(token, token_key=CSRF_FIELD)
    except ValidationError as exc:
        raise CSRFError(exc.args[0]) from None
    # Over HTTPS the form must also come from this host (as CSRFProtect does; a host
    # behind a proxy that rewrites Host may turn this part off with WTF_CSRF_SSL_STRICT).
    if request.is_secure and current_app.config.get("WTF_CSRF_SSL_STRICT", True):
        if not request.referrer:
            raise CSRFError("The referrer header is missing.")
        if not same_origin(request.referrer, f"https://{request.host}/"):
            raise CSRFError("The referrer does not match the host.")


def console_csrf_token() -> str:
    """The session's CSRF token, signed, for a form field or htmx's header."""
    return generate_csrf(token_key=CSRF_FIELD)


def forget_csrf_secret() -> None:
    """Drop the session's CSRF secret (at sign-in): the next page gets a new token."""
    session.pop(CSRF_FIELD, None)
    g.pop(CSRF_FIELD, None)


def security_headers(response: Response) -> Response:
    headers = response.headers
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "same-origin")
    headers["X-Request-ID"] = g.get("request_id", "")
    if request.endpoint != "jobwarden.static":
        headers["Cache-Control"] = "no-store"
        # Pages and their htmx fragments differ; caches must not mix them.
        headers.add("Vary", "HX-Request")
    return response


def this_page() -> str:
    """The address the browser is at, to come back to: request.full_path is relative to
    the app, so the app's own mount point (SCRIPT_NAME: a WSGI mount or a proxy's path
    prefix) goes in front; without a query it has no trailing "?". Whoever redirects to
    it still passes it through safe_next_url."""
    return request.script_root + request.full_path.rstrip("?")


def safe_next_url(target: str | None, default: str = "/") -> str:
    """`target` if it is a path on this site, else `default` (no open redirects).

    Strict on purpose: browsers drop tabs and newlines from addresses and read "\\" as
    "/", and proxies or frameworks may percent-decode a path before following it, so a
    path is refused when any of its decodings starts with "//" or holds a backslash or a
    character that is not printable ("/%09/evil.example" becomes "//evil.example").
    """
    if not target:
        return default
    target = target.strip()
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/"):
        return default
    if "\\" in target or not target.isprintable():
        return default
    path = target.partition("?")[0].partition("#")[0]  # parts.path drops an empty netloc
    for _ in range(4):  # double encodings too: %252F is "/" after two decodes
        if path.startswith("//") or "\\" in path or not path.isprintable():
            return default
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    else:
        return default  # still encoded after four decodes: nobody's real address
    return target


def is_htmx() -> bool:
    """Whether to answer with a fragment: an htmx request that is not a history restore."""
    return bool(htmx) and not htmx.history_restore_request
