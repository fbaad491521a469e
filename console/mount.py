"""The console as a Flask extension that a host application mounts under a prefix.

    from jobwarden.console import Console
    Console(app, url_prefix="/ops/jobs", user_loader=current_staff, login_view="auth.login")

Everything the console adds lives in one blueprint named `jobwarden`: its endpoints
(`jobwarden.failed.index`), its templates (`jobwarden/base.html`), its static files
(`jobwarden.static`, served under the prefix), its error pages and its request hooks.
The host's own pages, templates, error handlers and login are left as they were.
`jobwarden.console.create_app()` builds a tiny host that mounts it at `/`.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask
from jinja2 import FileSystemLoader, PrefixLoader

from jobwarden.console.core import config
from jobwarden.console.core.config import EXTENSION, UserLoader, load_settings
from jobwarden.console.core.resources import resource_dir
from jobwarden.console.data.database import ConsoleDatabase
from jobwarden.console.data.replica import ReplicaDatabase
from jobwarden.console.views import AREAS, overview
from jobwarden.console.views import install as install_navigation
from jobwarden.console.web import auth, errors, formatting, reads, security
from jobwarden.console.web.jsontree import json_tree
from jobwarden.worker.store.db import parse_url

#: The blueprint's name: every endpoint of the console starts with "jobwarden.".
NAME = "jobwarden"


class Console:
    """The operations console, mounted in `app` under `url_prefix`.

    `user_loader`, when given, is called on every console request and returns the host's
    signed-in user as `(name, role)` — role one of viewer, operator, admin — or None.
    The console then has no login of its own: a request without a user is sent to the
    host's `login_view` endpoint (with `next`), or refused with 403 when there is none.
    Operator actions are audited under the name it returns.

    Without `user_loader` the console signs users in itself (`console_users`, managed
    with `jobwarden user add`), keeping its keys in the host's session under `jobwarden_`.

    `database_url` is where the jobs are: the database the host enqueues them in (default:
    DATABASE_URL; with neither, mounting fails rather than read another database).
    `external_url` is the address people open the console at, prefix included
    (`https://shop.example.com/ops/jobs`; default JOBWARDEN_CONSOLE_URL): the alerts'
    links start with it. `settings` overrides the console's settings (console/core/config.py);
    `settings={"READ_URL": ...}` (default JOBWARDEN_CONSOLE_READ_URL) names a streaming
    replica for its pages of figures (console/web/reads.py).

    The top bar links back to the host: to its `home_view` endpoint, labelled
    `home_label` (default: the site's root, when mounted under a prefix), and, with a
    host's login, to its `logout_view` endpoint (a form with the session's CSRF token
    when that endpoint takes POST, a link otherwise).
    """

    def __init__(self, app: Flask | None = None, *, url_prefix: str = "/jobs",
                 user_loader: UserLoader | None = None, login_view: str | None = None,
                 database_url: str | None = None, external_url: str | None = None,
                 home_view: str | None = None, home_label: str = "Back to the app",
                 logout_view: str | None = None, settings: dict[str, Any] | None = None):
        self.url_prefix = url_prefix.rstrip("/")
        self.user_loader = user_loader
        self.login_view = login_view
        self.home_view = home_view
        self.home_label = home_label
        self.logout_view = logout_view
        self.settings = load_settings()
        self.settings.update(settings or {})
        if database_url:
            self.settings["DATABASE_URL"] = database_url
        if external_url:
            self.settings["EXTERNAL_URL"] = external_url
        self.settings["EXTERNAL_URL"] = config.external_url(self.settings.get("EXTERNAL_URL"))
        self.db: ConsoleDatabase | None = None
        #: The standby the pages of figures read (JOBWARDEN_CONSOLE_READ_URL), if any.
        self.replica: ReplicaDatabase | None = None
        if app is not None:
            self.init_app(app)

    @property
    def own_login(self) -> bool:
        """Whether the console signs users in itself (no host user_loader)."""
        return self.user_loader is None

    def init_app(self, app: Flask) -> None:
        if NAME in app.blueprints:
            raise RuntimeError("the Jobwarden console is already mounted in this app")
        if not app.config.get("SECRET_KEY"):
            raise RuntimeError("the console needs the app's SECRET_KEY (sessions, CSRF)")
        url = self.settings.get("DATABASE_URL")
        if not url:
            # The embedded PostgreSQL would be another database than the host's: its pages
            # would show no jobs, or fail on missing tables, instead of the host's jobs.
            raise RuntimeError(
                "the Jobwarden console mounted in this app has no database: pass "
                "Console(app, database_url=...) the URL your app enqueues its jobs in "
                "(the one Flask-SQLAlchemy uses), or set DATABASE_URL")
        pool_size = self.settings.get("DB_POOL_SIZE", 5)
        self.db = ConsoleDatabase(url, pool_size=pool_size)
        read_url = self.settings.get("READ_URL")
        if read_url:
            # A standby of another database would show another system's jobs as these:
            # refused now (ReplicaRefused), in one line, when it answers.
            self.replica = ReplicaDatabase(
                parse_url(read_url, "JOBWARDEN_CONSOLE_READ_URL"), pool_size=pool_size,
                retry_s=self.settings["READ_RETRY_SECONDS"])
            try:
                self.replica.check(self.db)
            except Exception:
                self.replica.dispose()
                self.db.dispose()
                raise
            app.extensions[reads.REPLICA] = self.replica
        app.extensions[EXTENSION] = self
        app.extensions["jobwarden_db"] = self.db
        app.register_blueprint(build_blueprint(), url_prefix=self.url_prefix or None)


class _ConsoleBlueprint(Blueprint):
    """Serves the console's templates as `jobwarden/<name>`, so none of them can shadow
    the host's templates (or be shadowed by them, unless the host means to)."""

    @property
    def jinja_loader(self) -> PrefixLoader:
        return PrefixLoader({NAME: FileSystemLoader(str(resource_dir("templates")))})


def build_blueprint() -> Blueprint:
    """A fresh `jobwarden` blueprint holding every page area, hook and error page."""
    bp = _ConsoleBlueprint(NAME, __name__, static_folder=str(resource_dir("static")),
                           static_url_path="/static")
    for area in AREAS:
        bp.register_blueprint(area.bp)
    security.install(bp)
    auth.install(bp)
    overview.install(bp)
    install_navigation(bp)
    formatting.install(bp, {"json_tree": json_tree})
    reads.install(bp)
    errors.install(bp)
    return bp
