"""The example shop's staff sign-in (examples/shop/shop/admin.py) sends the user back only
to a path of the shop: users copy the example, so it must be as strict as the console."""

from __future__ import annotations

import re

import pytest

PASSWORD = "staff password 1"
_CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


@pytest.fixture
def shop(shop_package, database_url, clean_db):
    """The shop on the test database, its tables fresh, with staff member olga."""
    from shop import create_app
    from shop.admin import add_staff
    from shop.models import db

    app = create_app({"DATABASE_URL": database_url, "SECRET_KEY": "shop-login-tests",
                      "TESTING": True})
    with app.app_context():
        db.drop_all()
        db.create_all()
        add_staff("olga", PASSWORD, console_role="operator")
        db.session.commit()
    yield app
    with app.app_context():
        db.session.remove()
        db.drop_all()
        db.engine.dispose()
    app.extensions["jobwarden_db"].dispose()


def sign_in(app, next_url: str):
    client = app.test_client()
    token = _CSRF.search(client.get("/admin/login").get_data(as_text=True)).group(1)
    return client.post("/admin/login", query_string={"next": next_url}, data={
        "username": "olga", "password": PASSWORD, "csrf_token": token})


@pytest.mark.parametrize("next_url", [
    "/\t/evil.example/x", "/%09/evil.example/x", "//evil.example/x", "///evil.example/x",
    "/\\evil.example", "https:evil.example", "https://evil.example/", "/%2F/evil.example",
])
def test_the_shops_sign_in_never_redirects_off_the_site(shop, next_url):
    response = sign_in(shop, next_url)
    assert response.status_code == 303
    assert response.headers["Location"] == "/admin/", next_url


def test_the_shops_sign_in_returns_to_the_page_it_came_from(shop):
    response = sign_in(shop, "/ops/jobs/jobs?status=failed")
    assert response.headers["Location"] == "/ops/jobs/jobs?status=failed"
