"""An example shop that uses Jobwarden: the app factory.

Placing an order commits the order and its three jobs in one transaction (store.py); the
jobs (jobs.py) call two fake providers the shop serves itself (providers.py); the jobs
console is mounted at /ops/jobs behind the shop's own admin login (admin.py).
"""

from __future__ import annotations

import os

from flask import Flask
from flask_wtf.csrf import CSRFProtect

from jobwarden.console import Console
from jobwarden.worker.store.db import database_url, sqlalchemy_url
from shop import admin, providers, store
from shop.models import db

csrf = CSRFProtect()


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("SHOP_SECRET_KEY", "dev-only-shop-secret"),
        SHOP_CRM_FLAKINESS=float(os.environ.get("SHOP_CRM_FLAKINESS", "0.2")),
    )
    app.config.update(config or {})
    # One database for the shop and Jobwarden: an order and its jobs commit together.
    url = app.config.setdefault("DATABASE_URL", database_url())
    app.config.setdefault("SQLALCHEMY_DATABASE_URI", sqlalchemy_url(url))

    db.init_app(app)
    csrf.init_app(app)
    admin.login_manager.init_app(app)
    app.register_blueprint(store.bp)
    app.register_blueprint(admin.bp, url_prefix="/admin")
    app.register_blueprint(providers.bp, url_prefix="/fake")
    csrf.exempt(providers.bp)  # machine-to-machine JSON, like a real provider's API

    # The jobs console, inside the shop: the shop's staff sign in once, at /admin/login.
    Console(app, url_prefix="/ops/jobs", user_loader=admin.console_identity,
            login_view="admin.login", database_url=url, home_view="admin.dashboard",
            home_label="Shop admin", logout_view="admin.logout")
    return app
