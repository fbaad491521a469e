"""Sign-in, sessions and the headers every console response carries."""

from __future__ import annotations

import pytest
from werkzeug.routing import IntegerConverter


def every_get_path(app) -> list[str]:
    """Each GET route of the app, with 1 for its int parts and "x" for the others."""
    paths = []
    for rule in app.url_map.iter_rules():
        if "GET" not in rule.methods or rule.endpoint in ("jobwarden.static", "jobwarden.auth.login"):
            continue
        values = {arg: 1 if isinstance(rule._converters[arg], IntegerConverter)
                  else "x" for arg in rule.arguments}
        paths.append(rule.build(values, append_unknown=False)[1])
    return paths


def test_every_page_and_fragment_requires_a_session(app, client):
    paths = every_get_path(app)
    assert {"/", "/jobs/1", "/queues", "/users", "/_overview/x", "/metrics"} <= set(paths)
    for path in paths:
        response = client.get(path)
        if path == "/metrics":  # a scraper's token, or a session: never a login page
            assert response.status_code == 401
            continue
        assert response.status_code == 302, path
        assert "/login?next=" in response.headers["Location"], path
    fragment = client.get("/_overview/counts", headers={"HX-Request": "true"})
    assert fragment.status_code == 401 and fragment.headers["HX-Redirect"].startswith("/login")
    assert client.post("/jobs/1/retry").status_code in (400, 401)


def test_a_wrong_password_does_not_sign_in(client, login):
    response = login(client, "otto", "not the password")
    assert response.status_code == 401
    assert "wrong password" in response.get_data(as_text=True)
    assert login(client, "nobody").status_code == 401
    assert client.get("/").status_code == 302


def test_sign_in_redirects_only_within_the_site(client, post_form):
    token_page = client.get("/login?next=//evil.example/").get_data(as_text=True)
    assert 'value="//evil.example/"' not in token_page
    response = post_form(client, "/login?next=https://evil.example/",
                         {"username": "otto", "password": "correct horse battery"},
                         token_from="/login")
    assert response.status_code == 303 and response.headers["Location"] == "/"


@pytest.mark.parametrize("next_url", ["/%09/evil.example/x", "/%2509/evil.example/x",
                                      "///evil.example/x", "/%5Cevil.example", "https:evil.example",
                                      "/%252F%252Fevil.example"])
def test_sign_in_never_redirects_to_a_hostile_next_address(app, post_form, next_url):
    client = app.test_client()
    response = post_form(client, f"/login?next={next_url}",
                         {"username": "otto", "password": "correct horse battery"},
                         token_from="/login")
    assert response.status_code == 303 and response.headers["Location"] == "/", next_url


def test_the_session_cookie_is_httponly_and_samesite(client, login):
    response = login(client, "otto")
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    https = client.get("/", base_url="https://localhost")
    assert https.status_code == 200


def test_responses_carry_a_csp_without_inline_scripts(viewer):
    response = viewer.get("/")
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert response.headers["X-Frame-Options"] == "DENY"
    html = response.get_data(as_text=True)
    assert "<script>" not in html and " style=" not in html
    assert "/static/vendor/htmx-2.0.4.min.js" in html


def test_signing_out_is_a_post_with_csrf(operator, post_form):
    assert operator.get("/logout").status_code == 405
    assert operator.post("/logout").status_code == 400
    assert post_form(operator, "/logout", {}).status_code == 303
    assert operator.get("/").status_code == 302


def test_only_an_admin_manages_users(client, login, post_form):
    login(client, "otto")
    assert client.get("/users").status_code == 403
    client.post("/logout", data={"csrf_token": ""})
    client.delete_cookie("jobwarden_session")
    login(client, "ada")
    assert "otto" in client.get("/users").get_data(as_text=True)
    response = post_form(client, "/users", {"username": "nina", "password": "long enough pw",
                                            "role": "viewer"}, token_from="/users")
    assert response.status_code == 303
    assert "nina" in client.get("/users").get_data(as_text=True)


def test_a_disabled_user_can_no_longer_sign_in(client, login, post_form, clean_db):
    import psycopg

    login(client, "ada")
    with psycopg.connect(clean_db) as conn:
        otto = conn.execute("SELECT id FROM console_users WHERE username = 'otto'").fetchone()[0]
    response = post_form(client, f"/users/{otto}/access", {"role": "operator",
                                                           "access": "disabled"},
                         token_from="/users")
    assert response.status_code == 303
    other = client.application.test_client()
    assert login(other, "otto").status_code == 401


def test_an_unreachable_database_is_a_clear_503_not_a_traceback():
    from jobwarden.console import create_app

    app = create_app({"TESTING": True, "SECRET_KEY": "t", "WTF_CSRF_ENABLED": False,
                      "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/nowhere"})
    try:
        response = app.test_client().post("/login", data={"username": "a", "password": "b"})
        assert response.status_code == 503
        body = response.get_data(as_text=True)
        assert "Database unavailable" in body and "Traceback" not in body
    finally:
        app.extensions["jobwarden_db"].dispose()
