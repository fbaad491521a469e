"""A console pointed at a database without Jobwarden's tables says which database and
what to run, on a plain page without a traceback; a console mounted in a host app with no
database refuses to mount instead of reading another one (the embedded PostgreSQL)."""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask

from jobwarden.console import Console, create_app
from jobwarden.worker.store import db as dbmod


def mounted(url: str, **options) -> Flask:
    app = Flask("host")
    app.config.update(SECRET_KEY="host-secret", WTF_CSRF_ENABLED=False)
    Console(app, url_prefix="/ops/jobs", database_url=url, **options)
    return app


def where(url: str) -> str:
    """host:port/dbname of a test database's URL, as the page names it: on the embedded
    PostgreSQL the host is its socket directory (`?host=`), with no port."""
    parts = urlsplit(url)
    host = parse_qs(parts.query).get("host", [parts.hostname or "localhost"])[0]
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}{parts.path}"


@pytest.fixture
def unmigrated_host(empty_database):
    app = mounted(empty_database, user_loader=lambda: ("hannah", "operator"))
    yield app
    app.extensions["jobwarden_db"].dispose()


# /ops/jobs/login is the console's 404 when the host owns the login: the 404 page's header
# reads the database, and used to fail there with a bare 500 and a logged traceback.
@pytest.mark.parametrize("path", ["/ops/jobs/", "/ops/jobs/jobs", "/ops/jobs/login"])
def test_every_console_page_on_an_unmigrated_database_names_it_and_says_run_migrate(
        unmigrated_host, empty_database, path, caplog):
    with caplog.at_level(logging.INFO):
        page = unmigrated_host.test_client().get(path)

    text = page.get_data(as_text=True)
    assert page.status_code == 500
    assert (f"The database at {where(empty_database)} has no Jobwarden tables: "
            "run `jobwarden migrate`") in text
    assert "Traceback" not in text and "UndefinedTable" not in text
    assert not any(r.exc_info for r in caplog.records)  # no traceback in the log either
    assert any("has no Jobwarden tables" in r.getMessage() for r in caplog.records)


def test_signing_in_to_the_standalone_console_on_an_unmigrated_database_says_run_migrate(
        empty_database):
    config = {"TESTING": True, "SECRET_KEY": "t", "WTF_CSRF_ENABLED": False,
              "DATABASE_URL": empty_database}
    # Refused at start (tests/integration/test_schema_revision.py)...
    with pytest.raises(dbmod.SchemaOutOfDate, match="no Jobwarden tables yet: run "
                                                    "`jobwarden migrate` first"):
        create_app(config)
    # ...and a console whose tables went after it started says so on its pages.
    app = create_app({**config, "CHECK_SCHEMA": False})
    try:
        page = app.test_client().post("/login", data={"username": "ada", "password": "x"})
    finally:
        app.extensions["jobwarden_db"].dispose()

    assert page.status_code == 500
    assert "has no Jobwarden tables: run `jobwarden migrate`" in page.get_data(as_text=True)


def test_a_database_migrated_by_an_older_version_is_told_apart_from_an_empty_one(
        empty_database):
    dbmod.migrate(empty_database, revision="0008")  # before the rollups the overview reads
    app = mounted(empty_database, user_loader=lambda: ("hannah", "operator"))
    try:
        page = app.test_client().get("/ops/jobs/")
    finally:
        app.extensions["jobwarden_db"].dispose()

    assert page.status_code == 500
    assert (f"The database at {where(empty_database)} has Jobwarden tables older than this "
            "console: run `jobwarden migrate`") in page.get_data(as_text=True)


def test_a_console_mounted_without_a_database_refuses_to_mount_and_names_the_fix(
        monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    # A file where the embedded server's folder would go: starting one for the console
    # fails at once (NotADirectoryError) rather than leave a server running.
    (tmp_path / "home").write_text("not a folder")
    monkeypatch.setenv("JOBWARDEN_HOME", str(tmp_path / "home"))
    app = Flask("host")
    app.config["SECRET_KEY"] = "host-secret"

    with pytest.raises(RuntimeError, match=r"Console\(app, database_url=\.\.\.\)"):
        Console(app, url_prefix="/ops/jobs")
    assert "jobwarden" not in app.blueprints


def test_a_console_mounted_without_an_argument_uses_database_url(monkeypatch, clean_db):
    monkeypatch.setenv("DATABASE_URL", clean_db)
    app = Flask("host")
    app.config["SECRET_KEY"] = "host-secret"
    Console(app, url_prefix="/ops/jobs")
    try:
        assert app.extensions["jobwarden_db"].url == clean_db
    finally:
        app.extensions["jobwarden_db"].dispose()
