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
    from jobwarden.console.cli.accounts import user_reset

    with pytest.raises(ValueError, match="last admin"):
        user_reset("ada", "a new long passphrase", role="operator", database_url=clean_db)
    assert role_of(clean_db, "ada") == "admin"


def test_another_admin_may_be_demoted(admin, post_form, clean_db):
    from jobwarden.console.cli.accounts import user_add

    user_add("grace", "admin", "grace long passphrase", database_url=clean_db)
    post_form(admin, "/users", {"username": "grace", "role": "operator",
                                "password": "grace long passphrase"}, token_from="/users")
    assert role_of(clean_db, "grace") == "operator"


#: (user name, password): each refused by the one policy, whichever way it comes in.
REFUSED = [
    ("ada\u200b", "a fine long passphrase"),  # a zero-width look-alike of ada
    ("\u0430da", "a fine long passphrase"),  # Cyrillic а
    ("\u202eadmin", "a fine long passphrase"),
    ("nina", " " * 12),
    ("nina", "short pw"),  # 8 characters: below the minimum
    ("nina", "password123456"),
]


@pytest.mark.parametrize("name, password", REFUSED)
def test_the_form_and_the_cli_refuse_the_same_names_and_passwords(admin, post_form, clean_db,
                                                                   name, password):
    from jobwarden.console.cli.accounts import user_add

    before = scalar(clean_db, "SELECT count(*) FROM console_users")
    page = post_form(admin, "/users", {"username": name, "password": password,
                                       "role": "admin"}, token_from="/users",
                     follow_redirects=True)
    assert 'data-testid="flash-error"' in page.get_data(as_text=True)
    with pytest.raises(ValueError):
        user_add(name, "admin", password, database_url=clean_db)
    assert scalar(clean_db, "SELECT count(*) FROM console_users") == before


def test_names_are_stored_normalized_and_sign_in_normalizes_too(admin, post_form, clean_db,
                                                                app, login):
    post_form(admin, "/users", {"username": "ＮＩＮＡ", "password": "a fine long passphrase",
                                "role": "viewer"}, token_from="/users")
    assert role_of(clean_db, "nina") == "viewer"
    assert login(app.test_client(), " Nina ", "a fine long passphrase").status_code == 303


@pytest.mark.parametrize("typed", ["ｏｐ１", "OP1", "Op1"])
def test_a_name_written_differently_from_an_existing_user_is_refused_not_a_reset(
        admin, post_form, clean_db, typed):
    from jobwarden.console.cli.accounts import user_add

    user_add("op1", "operator", "op1 long passphrase", database_url=clean_db)
    before = scalar(clean_db, "SELECT password_hash || role || session_generation "
                              "FROM console_users WHERE username = 'op1'")
    page = post_form(admin, "/users", {"username": typed, "role": "admin",
                                       "password": "attacker passphrase"},
                     token_from="/users", follow_redirects=True).get_data(as_text=True)
    assert "Not saved" in page and "op1" in page
    assert scalar(clean_db, "SELECT password_hash || role || session_generation "
                            "FROM console_users WHERE username = 'op1'") == before
    assert scalar(clean_db, "SELECT count(*) FROM console_users") == 4


def test_the_exact_name_of_an_existing_user_still_resets_them(admin, post_form, clean_db):
    from jobwarden.console.cli.accounts import user_add

    user_add("op1", "operator", "op1 long passphrase", database_url=clean_db)
    post_form(admin, "/users", {"username": "op1", "role": "viewer",
                                "password": "a new long passphrase"}, token_from="/users")
    assert role_of(clean_db, "op1") == "viewer"


def test_two_admins_disabling_each_other_at_once_leave_one_enabled(clean_db, users):
    """The second access change waits for the first (the enabled admins are locked), then
    finds its target the last enabled admin and is refused: never both disabled."""
    import threading

    import psycopg

    from jobwarden.console.cli.accounts import user_add
    from jobwarden.console.data.database import CQ
    from tests.helpers import wait_for

    user_add("grace", "admin", "grace long passphrase", database_url=clean_db)
    ada = scalar(clean_db, "SELECT id FROM console_users WHERE username = 'ada'")
    grace = scalar(clean_db, "SELECT id FROM console_users WHERE username = 'grace'")
    params = {"role": "admin", "disabled": True}
    with psycopg.connect(clean_db) as first, psycopg.connect(clean_db) as second:
        assert first.execute(CQ.console_user_set_access.sql, {**params, "user_id": grace}).fetchall()
        pid = second.info.backend_pid
        answer: list = []
        racer = threading.Thread(target=lambda: answer.append(second.execute(
            CQ.console_user_set_access.sql, {**params, "user_id": ada}).fetchall()))
        racer.start()
        wait_for(lambda: scalar(clean_db, "SELECT wait_event_type = 'Lock' FROM "
                                          "pg_stat_activity WHERE pid = %s", [pid]),
                 timeout=10, message="the second change to wait for the first")
        first.commit()
        racer.join(10)
        second.commit()
    assert answer == [[]]
    assert scalar(clean_db, "SELECT count(*) FROM console_users "
                            "WHERE role = 'admin' AND NOT disabled") == 1
    assert scalar(clean_db, "SELECT disabled FROM console_users WHERE id = %s", [ada]) is False

