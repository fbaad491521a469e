"""What `jobwarden user add` and `jobwarden console` call (worker/cli.py wires them)."""

from __future__ import annotations

import getpass
import sys

from worker.schema import ROLES

MIN_PASSWORD = 8


def read_password(prompt: str = "Password: ", stdin=None) -> str:
    """Prompt twice on a terminal; otherwise read one line from standard input."""
    stream = stdin or sys.stdin
    if stream.isatty():
        first = getpass.getpass(prompt)
        if getpass.getpass("Repeat password: ") != first:
            raise ValueError("the passwords do not match")
        return first
    return stream.readline().rstrip("\r\n")


def user_add(username: str, role: str, password: str, database_url: str | None = None) -> bool:
    """Create a console user, or reset an existing one's password and role.

    Returns True if the user was created, False if an existing one was updated.
    """
    import psycopg

    from console.auth import hash_password
    from worker.db import connect
    from worker.queries import Q

    username = (username or "").strip()
    if not username or len(username) > 100:
        raise ValueError("a user name of 1-100 characters is required")
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    if len(password or "") < MIN_PASSWORD:
        raise ValueError(f"the password needs at least {MIN_PASSWORD} characters")
    with connect(database_url) as conn:
        try:
            row = conn.execute(Q.console_user_upsert, {
                "username": username, "password_hash": hash_password(password), "role": role,
            }).fetchone()
        except psycopg.Error as exc:
            raise RuntimeError(f"could not save user {username!r}: {exc}") from exc
    return bool(row[1])


def make_server(host: str = "127.0.0.1", port: int = 8080, config: dict | None = None):
    """A threaded werkzeug server for the console (serve_forever() / shutdown()).

    `port=0` picks a free port; read it back from `server.server_port`.
    """
    from werkzeug.serving import make_server as werkzeug_server

    from console import create_app

    return werkzeug_server(host, port, create_app(config), threaded=True)


def serve(host: str = "127.0.0.1", port: int = 8080) -> None:
    """Run the console in the foreground until interrupted (production: gunicorn)."""
    server = make_server(host, port)
    print(f"Jobwarden console on http://{host}:{server.server_port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
