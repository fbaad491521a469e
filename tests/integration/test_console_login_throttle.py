"""Sign-in is throttled by account and by client address: after a few wrong passwords
the next tries are answered 429 with Retry-After, for a delay that grows and is capped,
so guessing is slow and a real user is never locked out for long."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import psycopg
from argon2 import PasswordHasher
from werkzeug.serving import make_server

from tests.console_support import PASSWORD, csrf_token
from tests.helpers import wait_for

ATTACKER = {"REMOTE_ADDR": "198.51.100.66"}
ELSEWHERE = {"REMOTE_ADDR": "203.0.113.9"}
_CSRF_FIELD = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


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


@contextmanager
def serving(app):
    """`app` on a real threaded WSGI server on a free port, for truly parallel requests."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


def signed_out_session(base: str) -> tuple[str, str]:
    """A session cookie and its CSRF token, read from the login form over HTTP."""
    with urllib.request.urlopen(base + "/login") as response:
        cookie = response.headers["Set-Cookie"].split(";", 1)[0]
        return cookie, _CSRF_FIELD.search(response.read().decode()).group(1)


def parallel_attempts(base: str, username: str, password: str, count: int) -> list[int]:
    """`count` sign-ins POSTed at the same instant (a barrier), their status codes."""
    cookie, token = signed_out_session(base)
    body = urllib.parse.urlencode({"username": username, "password": password,
                                   "csrf_token": token}).encode()
    barrier = threading.Barrier(count)

    def post(_):
        request = urllib.request.Request(base + "/login", data=body, headers={"Cookie": cookie})
        barrier.wait()
        try:
            with urllib.request.urlopen(request) as response:
                return response.status
        except urllib.error.HTTPError as refused:
            return refused.code

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(post, range(count)))


def test_parallel_wrong_passwords_are_counted_before_any_is_checked(app, clean_db):
    # A hash that takes a while to verify, as production's does: the attempts overlap.
    slow = PasswordHasher(time_cost=2, memory_cost=32 * 1024, parallelism=1)
    with psycopg.connect(clean_db) as conn:
        conn.execute("UPDATE console_users SET password_hash = %s WHERE username = 'otto'",
                     [slow.hash(PASSWORD)])
    with serving(app) as base:
        codes = parallel_attempts(base, "otto", "guess", 40)
    # Exactly the free attempts are checked, however long their checks take: the lock
    # the last of them sets holds until its answer is known.
    assert codes.count(401) == account_failures_allowed(app), codes
    assert codes.count(429) == 40 - account_failures_allowed(app), codes


class HeldChecks:
    """The console's password check, each one counted; the first `hold` of them held until
    released, so those checks in flight last as long as the test says."""

    def __init__(self, check, hold: int):
        self.check = check
        self.hold = hold
        self.release = threading.Event()
        self.started = 0
        self.lock = threading.Lock()

    def __call__(self, password_hash, password):
        with self.lock:
            self.started += 1
            held = self.started <= self.hold
        if held:
            assert self.release.wait(timeout=120), "never released"
        return self.check(password_hash, password)


def test_the_lock_holds_while_the_free_attempts_are_still_being_checked(app, clean_db,
                                                                         monkeypatch):
    """40 wrong passwords at once; their checks are held past the first lock's delay (1 s)
    and 40 more are sent: none of the 80 beyond the free 5 reaches a check. Once the 5
    are answered, the next attempt still finds the lock (its delay runs from then)."""
    from jobwarden.console.web import auth

    allowed = account_failures_allowed(app)
    held = HeldChecks(auth._verify, hold=allowed)
    monkeypatch.setattr(auth, "_verify", held)
    with serving(app) as base, ThreadPoolExecutor(max_workers=1) as background:
        first = background.submit(parallel_attempts, base, "otto", "guess", 40)
        try:
            wait_for(lambda: held.started == allowed, timeout=60, interval=0.01,
                     message="the free attempts' checks")
            # The delay the fifth failure earns (1 s) passes by the database's clock while
            # the five are still being checked.
            with psycopg.connect(clean_db, autocommit=True) as conn:
                wait_for(lambda: conn.execute(
                    "SELECT now() > last_failure_at + interval '1.5 s' "
                    "FROM console_login_throttle WHERE subject = 'account:otto'").fetchone()[0],
                    timeout=60, interval=0.01, message="the first delay to pass")
            second = parallel_attempts(base, "otto", "guess", 40)
            assert second == [429] * 40, second
            assert held.started == allowed
        finally:
            held.release.set()
        codes = first.result(timeout=120)
        assert sorted(codes) == [401] * allowed + [429] * (40 - allowed), codes
        assert parallel_attempts(base, "otto", "guess", 1) == [429]
    assert held.started == allowed


def test_a_successful_sign_in_is_no_failure_of_its_address(app):
    client = app.test_client()
    allowed = app.extensions["jobwarden_console"].settings["LOGIN_ADDRESS_FREE_FAILURES"]
    for i in range(allowed - 1):
        assert attempt(client, f"user{i}", "guess").status_code == 401
    assert attempt(app.test_client(), "vera", PASSWORD).status_code == 303
    # The address still has its last free failure, and only then is it locked.
    assert attempt(client, "nobody", "guess").status_code == 401
    assert attempt(client, "nobody2", "guess").status_code == 429


class GatedChecks:
    """The console's password check, held per password until that password's gate opens."""

    def __init__(self, check, *held: str):
        self.check = check
        self.gates = {password: threading.Event() for password in held}
        self.started: list[str] = []

    def __call__(self, password_hash, password):
        self.started.append(password)
        if password in self.gates:
            assert self.gates[password].wait(timeout=120), "never released"
        return self.check(password_hash, password)


def sign_in(base: str, username: str, password: str) -> int:
    """One sign-in POSTed from its own signed-out session; its status code."""
    cookie, token = signed_out_session(base)
    body = urllib.parse.urlencode({"username": username, "password": password,
                                   "csrf_token": token}).encode()
    request = urllib.request.Request(base + "/login", data=body, headers={"Cookie": cookie})
    try:
        with urllib.request.build_opener(_NoRedirects).open(request) as response:
            return response.status
    except urllib.error.HTTPError as answered:
        return answered.code


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Answer a redirect as it came (a signed-in 303), not the page it leads to."""

    def redirect_request(self, *args, **kwargs):
        return None


def address_lock_left(url: str) -> float | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT extract(epoch FROM locked_until - now())::float8 "
                           "FROM console_login_throttle WHERE subject LIKE 'address:%'").fetchone()
    return row[0] if row else None


def test_a_sign_in_that_succeeds_during_the_locking_check_leaves_the_lock_its_delay(
        app, clean_db, monkeypatch):
    """The address's last free attempt (a wrong password) is being checked when an earlier
    attempt from it, a right password, succeeds and is taken back from its count: the
    wrong one's answer still starts the lock's short delay, not the cap's 15 minutes."""
    from jobwarden.console.web import auth

    monkeypatch.setitem(app.extensions["jobwarden_console"].settings,
                        "LOGIN_ADDRESS_FREE_FAILURES", 2)
    gated = GatedChecks(auth._verify, PASSWORD, "guess")
    monkeypatch.setattr(auth, "_verify", gated)
    with serving(app) as base, ThreadPoolExecutor(max_workers=2) as background:
        try:
            right = background.submit(sign_in, base, "vera", PASSWORD)
            wait_for(lambda: PASSWORD in gated.started, timeout=60, interval=0.01,
                     message="the right password's check")
            wrong = background.submit(sign_in, base, "otto", "guess")
            wait_for(lambda: "guess" in gated.started, timeout=60, interval=0.01,
                     message="the wrong password's check")
            # Locked while the answer is unknown.
            assert address_lock_left(clean_db) > 60
            gated.gates[PASSWORD].set()
            assert right.result(timeout=60) == 303
        finally:
            for gate in gated.gates.values():
                gate.set()
        assert wrong.result(timeout=60) == 401
    left = address_lock_left(clean_db)
    assert left is not None and left <= 1.0, left

