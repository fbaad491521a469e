"""The console's sub-commands of `jobwarden`: `console`, `user add|reset` and `demo`.

worker/cli.py knows nothing of the console: it finds `register` through the
`jobwarden.commands` entry point (pyproject.toml), so the runtime works without it.
"""

from __future__ import annotations

import getpass
import signal
import sys

from console.account_policy import check_password, normalize_username
from console.schema import ROLES
from worker.cli_args import port


def read_password(prompt: str = "Password: ", stdin=None) -> str:
    """Prompt twice on a terminal; otherwise read one line from standard input."""
    stream = stdin or sys.stdin
    if stream.isatty():
        first = getpass.getpass(prompt)
        if getpass.getpass("Repeat password: ") != first:
            raise ValueError("the passwords do not match")
        return first
    return stream.readline().rstrip("\r\n")


def user_add(username: str, role: str, password: str, database_url: str | None = None) -> None:
    """Create a console user. An existing name is refused (ValueError): resetting a
    password must be asked for by name, with `user_reset`."""
    from console.auth import hash_password
    from console.database import Q

    username = _checked(username, role, password)
    row = _save(Q.console_user_insert, username, database_url, {
        "username": username, "password_hash": hash_password(password), "role": role})
    if row is None:
        raise ValueError(f"{username!r} exists already: `jobwarden user reset {username}` "
                         "sets a new password (and --role a new role)")


def user_reset(username: str, password: str, role: str | None = None,
               database_url: str | None = None) -> str:
    """Set an existing user's password, and `role` when given; enables the account and
    ends its sessions. Returns the role it now has."""
    from console.auth import hash_password
    from console.database import Q

    username = _checked(username, role, password)
    found, new_role = _save(Q.console_user_reset, username, database_url, {
        "username": username, "password_hash": hash_password(password), "role": role})
    if not found:
        raise ValueError(f"no user {username!r}: `jobwarden user add {username} --role ROLE` "
                         "creates one")
    if new_role is None:
        raise ValueError(f"{username!r} is the last admin: add another admin first")
    return new_role


def _checked(username: str, role: str | None, password: str) -> str:
    """The normalized name, once name, role and password pass the account policy."""
    username = normalize_username(username)
    if role is not None and role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    check_password(password, username)
    return username


def _save(sql: str, username: str, database_url: str | None, params: dict):
    import psycopg

    from worker.db import connect

    with connect(database_url) as conn:
        try:
            return conn.execute(sql, params).fetchone()
        except psycopg.Error as exc:
            raise RuntimeError(f"could not save user {username!r}: {exc}") from exc


def make_server(host: str = "127.0.0.1", port: int = 8080, config: dict | None = None,
                access_log: bool = True):
    """A threaded werkzeug server for the console (serve_forever() / shutdown()).

    `port=0` picks a free port; read it back from `server.server_port`. A busy port
    raises OSError. `access_log=False` keeps per-request lines off the terminal.
    """
    import logging
    import socket

    from werkzeug.serving import make_server as werkzeug_server
    from werkzeug.serving import select_address_family

    from console import create_app

    if not access_log:  # werkzeug logs each request at INFO on its own handler
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # We bind the socket ourselves: werkzeug answers a busy port with sys.exit(1), and the
    # caller should say which option changes the port.
    listener = socket.create_server((host, port), family=select_address_family(host, port))
    try:
        server = werkzeug_server(host, port, create_app(config), threaded=True,
                                 fd=listener.fileno())
    finally:
        listener.close()  # the server holds its own duplicate of the socket
    server.server_port = server.port  # the bound port, also when `port` was 0
    return server


def serve(host: str = "127.0.0.1", port: int = 8080) -> int:
    """Run the console in the foreground until interrupted (production: gunicorn)."""
    try:
        server = make_server(host, port)
    except OSError as exc:
        print(f"jobwarden console: cannot listen on {host}:{port} ({exc.strerror}); "
              "choose another port with --port", file=sys.stderr)
        return 2
    # Ctrl-C stops it even when it was started with SIGINT ignored, as a non-interactive
    # shell starts a background command (a script's `jobwarden console &`, a test run in the
    # background): otherwise it would keep serving. SIGTERM (a process manager, `kill`)
    # stops it the same way. The worker installs its handlers for the same reason.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"Jobwarden console on http://{host}:{server.server_port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def cmd_console(args) -> int:
    return serve(args.host, args.port)


def cmd_user_add(args) -> int:
    try:
        user_add(args.name, args.role, read_password())
    except ValueError as exc:
        print(f"jobwarden user add: {exc}", file=sys.stderr)
        return 2
    print(f"user {normalize_username(args.name)!r} saved with role {args.role}")
    return 0


def cmd_user_reset(args) -> int:
    try:
        role = user_reset(args.name, read_password("New password: "), role=args.role)
    except ValueError as exc:
        print(f"jobwarden user reset: {exc}", file=sys.stderr)
        return 2
    print(f"password of {normalize_username(args.name)!r} reset (role {role}); "
          "its sessions are signed out")
    return 0


def cmd_demo(args) -> int:
    from console.demo import run_demo

    return run_demo(port=args.port, exit_when_done=args.exit_when_done,
                    use_database_url=args.yes_use_this_database)


def register(sub) -> None:
    """Add the console's sub-commands to `jobwarden`'s argparse sub-parsers."""
    c = sub.add_parser("console", help="serve the operations console (development server)")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=port, default=8000)
    c.set_defaults(fn=cmd_console)

    d = sub.add_parser("demo", help="embedded DB + demo jobs + worker + console")
    d.add_argument("--port", type=port, default=8000)
    d.add_argument("--exit-when-done", action="store_true",
                   help="exit once the demo jobs have settled instead of serving on")
    d.add_argument("--yes-use-this-database", action="store_true",
                   help="run on the database DATABASE_URL names, which then gets the demo "
                        "jobs and an admin login with a published password (without it the "
                        "demo refuses DATABASE_URL and runs only on the embedded PostgreSQL)")
    # The demo prints its own story; worker chatter would bury it.
    d.set_defaults(fn=cmd_demo, default_log_level="WARNING")

    u = sub.add_parser("user", help="console users")
    usub = u.add_subparsers(dest="user_command", required=True)
    ua = usub.add_parser("add", help="add a console user (password prompted or from stdin); "
                                     "an existing name is refused: see `user reset`")
    ua.add_argument("name")
    ua.add_argument("--role", required=True, choices=list(ROLES))
    ua.set_defaults(fn=cmd_user_add)
    ur = usub.add_parser("reset", help="set an existing user's password (prompted or from "
                                       "stdin), enable them and sign out their sessions")
    ur.add_argument("name")
    ur.add_argument("--role", choices=list(ROLES),
                    help="a new role too (default: keep it; the last admin stays admin)")
    ur.set_defaults(fn=cmd_user_reset)
