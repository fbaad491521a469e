"""Managing console users: no admin can demote themselves (through either form), the
last admin cannot be demoted at all, and user names and passwords follow one policy."""

from __future__ import annotations

import pytest

from tests.helpers import scalar


def role_of(url, name):
    return scalar(url, "SELECT role FROM console_users WHERE username = %s", [name])


@pytest.fixture
def admin(client, login):
    assert login(client, "ada").status_code == 303
    return client


def test_the_add_or_reset_form_cannot_demote_yourself(admin, post_form, clean_db):
    page = post_form(admin, "/users", {"username": "ada", "role": "viewer",
                                       "password": "a new long passphrase"},
                     token_from="/users", follow_redirects=True)
    assert "cannot change your own role" in page.get_data(as_text=True)
    assert role_of(clean_db, "ada") == "admin"


def test_the_last_admin_cannot_be_demoted_from_the_cli(clean_db, users):
    from console.cli_commands import user_add

    with pytest.raises(ValueError, match="last admin"):
        user_add("ada", "operator", "a new long passphrase", database_url=clean_db)
    assert role_of(clean_db, "ada") == "admin"


def test_another_admin_may_be_demoted(admin, post_form, clean_db):
    from console.cli_commands import user_add

    user_add("grace", "admin", "grace long passphrase", database_url=clean_db)
    post_form(admin, "/users", {"username": "grace", "role": "operator",
                                "password": "grace long passphrase"}, token_from="/users")
    assert role_of(clean_db, "grace") == "operator"
