"""Sign-in is throttled by account and by client address: after a few wrong passwords
the next tries are answered 429 with Retry-After, for a delay that grows and is capped,
so guessing is slow and a real user is never locked out for long."""

from __future__ import annotations

import psycopg

from tests.console_support import PASSWORD, csrf_token

ATTACKER = {"REMOTE_ADDR": "198.51.100.66"}
ELSEWHERE = {"REMOTE_ADDR": "203.0.113.9"}


def attempt(client, username, password, environ=ATTACKER):
    token = csrf_token(client, "/login")
    return client.post("/login", data={"username": username, "password": password,
                                       "csrf_token": token}, environ_base=environ)


def expire_locks(url):
    """Let the current locks run out (instead of sleeping through them)."""
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE console_login_throttle SET locked_until = now() - interval '1 s'"
                     " WHERE locked_until IS NOT NULL")


def account_failures_allowed(app):
    return app.extensions["jobwarden_console"].settings["LOGIN_ACCOUNT_FREE_FAILURES"]


def test_wrong_passwords_lock_the_account_briefly_with_429_and_retry_after(app, clean_db):
    client = app.test_client()
    for _ in range(account_failures_allowed(app)):
        assert attempt(client, "otto", "guess").status_code == 401
    locked = attempt(client, "otto", "guess")
    assert locked.status_code == 429
    first = int(locked.headers["Retry-After"])
    assert 1 <= first <= app.extensions["jobwarden_console"].settings["LOGIN_ACCOUNT_LOCK_MAX_SECONDS"]
    # While locked, even the right password is not checked: no oracle for the attacker.
    assert attempt(client, "otto", PASSWORD).status_code == 429
    assert attempt(client, "otto", PASSWORD, ELSEWHERE).status_code == 429
    expire_locks(clean_db)
    assert attempt(client, "otto", "guess").status_code == 401
    second = attempt(client, "otto", "guess")
    assert second.status_code == 429 and int(second.headers["Retry-After"]) > first


def test_the_account_lock_is_capped_so_a_real_user_gets_back_in_soon(app, clean_db):
    client = app.test_client()
    with psycopg.connect(clean_db) as conn:
        conn.execute("INSERT INTO console_login_throttle (subject, failures, last_failure_at) "
                     "VALUES ('account:otto', 10000, now())")
    attempt(client, "otto", "guess")
    locked = attempt(client, "otto", "guess")
    assert locked.status_code == 429
    assert int(locked.headers["Retry-After"]) <= app.extensions["jobwarden_console"].settings["LOGIN_ACCOUNT_LOCK_MAX_SECONDS"]
    expire_locks(clean_db)
    assert attempt(app.test_client(), "otto", PASSWORD, ELSEWHERE).status_code == 303


def test_one_address_trying_many_accounts_is_throttled_without_locking_them(app):
    client = app.test_client()
    allowed = app.extensions["jobwarden_console"].settings["LOGIN_ADDRESS_FREE_FAILURES"]
    for i in range(allowed):
        assert attempt(client, f"user{i}", "guess").status_code == 401
    locked = attempt(client, "vera", PASSWORD)
    assert locked.status_code == 429 and int(locked.headers["Retry-After"]) >= 1
    # The accounts themselves are not locked: vera signs in from her own address.
    assert attempt(app.test_client(), "vera", PASSWORD, ELSEWHERE).status_code == 303


def test_a_successful_sign_in_forgets_earlier_failures(app):
    client = app.test_client()
    for _ in range(account_failures_allowed(app) - 1):
        attempt(client, "otto", "guess")
    assert attempt(client, "otto", PASSWORD).status_code == 303
    other = app.test_client()
    for _ in range(account_failures_allowed(app)):
        assert attempt(other, "otto", "guess").status_code == 401
