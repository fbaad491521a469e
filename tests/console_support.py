"""Fixtures and helpers shared by the console's tests (test-client and browser).

tests/conftest.py loads it with `pytest_plugins = ["tests.console_support"]`; tests take the
helpers as fixtures (`login`, `post_form`) rather than importing this module, so that
pytest imports it first, as a plugin.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import create_engine

from jobwarden.console import create_app
from jobwarden.console.cli.accounts import user_add
from jobwarden.console.data import sample_data
from jobwarden.worker.store.db import sqlalchemy_url

PASSWORD = "correct horse battery"
USERS = {"vera": "viewer", "otto": "operator", "ada": "admin"}
_CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashing():
    """Argon2 at its cheapest: production parameters cost ~0.7 s a hash on CI machines."""
    from argon2 import PasswordHasher, profiles

    from jobwarden.console.web import auth

    production = auth.hasher
    auth.hasher = PasswordHasher.from_parameters(profiles.CHEAPEST)
    yield
    auth.hasher = production


@pytest.fixture
def users(clean_db):
    """A viewer (vera), an operator (otto) and an admin (ada), all with PASSWORD."""
    for name, role in USERS.items():
        user_add(name, role, PASSWORD, database_url=clean_db)
    return USERS


@pytest.fixture
def app(clean_db, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret", "DATABASE_URL": clean_db})
    yield app
    app.extensions["jobwarden_db"].dispose()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def engine(clean_db):
    """A SQLAlchemy engine on the test database, for seeding rows with jobwarden.console.data.sample_data."""
    eng = create_engine(sqlalchemy_url(clean_db))
    yield eng
    eng.dispose()


@pytest.fixture
def make_job(engine):
    """A function that inserts one job in the given status (jobwarden.console.data.sample_data)."""
    def make(status: str, **fields) -> int:
        with engine.begin() as conn:
            return sample_data.insert_job(conn, status=status, **fields)

    return make


@pytest.fixture(name="login")
def login_fixture():
    """`login(client, username)`: sign in through the form."""
    return login


@pytest.fixture(name="post_form")
def post_form_fixture():
    """`post_form(client, url, data)`: POST with the session's CSRF token."""
    return post_form


def csrf_token(client, path: str = "/login") -> str:
    """The session's CSRF token, read from a rendered form."""
    html = client.get(path).get_data(as_text=True)
    match = _CSRF.search(html)
    if match is None:
        raise LookupError(f"no CSRF token on {path}")
    return match.group(1)


def login(client, username: str, password: str = PASSWORD):
    """Sign in through the form, with its CSRF token when it renders one: a test about
    CSRF must reach its own assertions even in a console whose protection is off."""
    html = client.get("/login").get_data(as_text=True)
    match = _CSRF.search(html)
    data = {"username": username, "password": password}
    if match is not None:
        data["csrf_token"] = match.group(1)
    return client.post("/login", data=data)


def post_form(client, url: str, data: dict, token_from: str = "/jobs", **kwargs):
    """POST like the browser does: with the CSRF token of a page the user can see."""
    return client.post(url, data={**data, "csrf_token": csrf_token(client, token_from)}, **kwargs)


@pytest.fixture
def operator(client):
    assert login(client, "otto").status_code == 303
    return client


@pytest.fixture
def viewer(client):
    assert login(client, "vera").status_code == 303
    return client
