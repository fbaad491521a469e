"""Headers, cookies, request ids and redirect checks that every response goes through."""

from __future__ import annotations

import re
import uuid
from urllib.parse import urlsplit

from flask import Flask, abort, g, request
from flask.sessions import SecureCookieSessionInterface
from flask_htmx import HTMX
from werkzeug.routing import IntegerConverter

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

htmx = HTMX()
_REQUEST_ID = re.compile(r"\A[A-Za-z0-9._:-]{1,64}\Z")


class BigintConverter(IntegerConverter):
    """`<int:…>` in routes, limited to PostgreSQL's bigint: a larger id is a 404, not an
    out-of-range error from the database."""

    def __init__(self, map, *args, **kwargs) -> None:
        kwargs.setdefault("max", 2**63 - 1)
        super().__init__(map, *args, **kwargs)


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


def install(app: Flask) -> None:
    """Request ids, security headers and the HTTPS-aware session cookie."""
    htmx.init_app(app)
    app.session_interface = SessionInterface()
    app.url_map.converters["int"] = BigintConverter
    app.before_request(refuse_nul_characters)
    if app.config.get("TRUST_PROXY"):
        from werkzeug.middleware.proxy_fix import ProxyFix

        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1)

    @app.before_request
    def assign_request_id() -> None:
        incoming = request.headers.get("X-Request-ID", "")
        g.request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex

    @app.after_request
    def security_headers(response):
        headers = response.headers
        headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        headers.setdefault("X-Content-Type-Options", "nosniff")
        headers.setdefault("X-Frame-Options", "DENY")
        headers.setdefault("Referrer-Policy", "same-origin")
        headers["X-Request-ID"] = g.get("request_id", "")
        if request.endpoint != "static":
            headers["Cache-Control"] = "no-store"
            # Pages and their htmx fragments differ; caches must not mix them.
            headers.add("Vary", "HX-Request")
        return response


def safe_next_url(target: str | None, default: str = "/") -> str:
    """`target` if it is a path on this site, else `default` (no open redirects)."""
    if not target:
        return default
    target = target.strip()
    if "\\" in target or any(ord(c) < 32 for c in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return default
    return target


def is_htmx() -> bool:
    """Whether to answer with a fragment: an htmx request that is not a history restore."""
    return bool(htmx) and not htmx.history_restore_request
