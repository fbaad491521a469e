"""A session ends when it should: on sign-out, a password reset, a role change or a
disabled account — even for a copy of the cookie taken before."""

from __future__ import annotations

import psycopg
import pytest

from tests.console_support import csrf_token

COOKIE = "jobwarden_session"


def copy_session(app, client):
    """A second browser holding a copy of `client`'s session cookie."""
    thief = app.test_client()
    thief.set_cookie(COOKIE, client.get_cookie(COOKIE).value)
    return thief


def user_id(url, name):
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT id FROM console_users WHERE username = %s",
                            [name]).fetchone()[0]


def signed_in(client) -> bool:
    return client.get("/jobs").status_code == 200


def test_a_cookie_copied_before_sign_out_no_longer_reads_or_acts(app, operator, post_form):
    thief = copy_session(app, operator)
    assert signed_in(thief)
    token = csrf_token(thief, "/jobs")
    assert post_form(operator, "/logout", {}).status_code == 303
    assert thief.get("/jobs").status_code == 302
    assert "/login" in thief.get("/jobs").headers["Location"]
    response = thief.post("/queues/default/pause", data={"csrf_token": token, "reason": "x",
                                                          "request_id": "r1"})
    assert response.status_code == 401
    assert signed_in(operator) is False


@pytest.mark.parametrize("change", ["password", "role", "disable"])
def test_an_admin_changing_a_user_ends_that_users_sessions(app, client, login, post_form,
                                                           clean_db, change):
    assert login(client, "otto").status_code == 303
    admin = app.test_client()
    assert login(admin, "ada").status_code == 303
    otto = user_id(clean_db, "otto")
    if change == "password":
        response = post_form(admin, "/users", {"username": "otto", "role": "operator",
                                               "password": "a whole new passphrase"},
                             token_from="/users")
    else:
        response = post_form(admin, f"/users/{otto}/access", {
            "role": "viewer" if change == "role" else "operator",
            "access": "disabled" if change == "disable" else "enabled"}, token_from="/users")
    assert response.status_code == 303
    assert not signed_in(client)
    assert signed_in(admin)  # the admin's own session is untouched


def test_signing_in_again_after_a_reset_works(app, client, login, post_form):
    assert login(client, "otto").status_code == 303
    admin = app.test_client()
    login(admin, "ada")
    post_form(admin, "/users", {"username": "otto", "role": "operator",
                                "password": "a whole new passphrase"}, token_from="/users")
    assert not signed_in(client)
    assert login(client, "otto", "a whole new passphrase").status_code == 303
    assert signed_in(client)


def test_a_password_reset_from_the_cli_ends_sessions_too(app, operator, clean_db):
    from jobwarden.console.cli.accounts import user_reset

    user_reset("otto", "another long passphrase", database_url=clean_db)
    assert not signed_in(operator)


def test_a_signed_in_user_gets_the_plain_503_when_the_database_is_down(app, operator):
    """The 503 page must not need the database again (to load the signed-in user)."""
    from jobwarden.console.data.database import ConsoleDatabase

    working = app.extensions["jobwarden_db"]
    app.extensions["jobwarden_db"] = ConsoleDatabase("postgresql://postgres@127.0.0.1:1/down")
    try:
        for path in ("/", "/jobs", "/failed", "/jobs/1"):
            response = operator.get(path)
            assert response.status_code == 503, path
            body = response.get_data(as_text=True)
            assert "Database unavailable" in body and "Traceback" not in body
        fragment = operator.get("/_overview/counts", headers={"HX-Request": "true"})
        assert fragment.status_code == 503
    finally:
        app.extensions["jobwarden_db"].dispose()
        app.extensions["jobwarden_db"] = working
