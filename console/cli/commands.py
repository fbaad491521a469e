"""The console's sub-commands of `jobwarden`: `console`, `user add|reset` and `demo`.

worker/cli/commands.py knows nothing of the console: it finds `register` through the
`jobwarden.commands` entry point (pyproject.toml), so the runtime works without it.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from argparse import Namespace
from typing import TextIO

from jobwarden.console.cli.accounts import user_add, user_reset
from jobwarden.console.cli.demo import run_demo
from jobwarden.console.cli.server import make_server, serve
from jobwarden.console.core.account_policy import normalize_username
from jobwarden.console.data.schema import ROLES
from jobwarden.worker.cli.args import port

__all__ = ["make_server", "read_password", "register", "serve", "user_add", "user_reset"]


def read_password(prompt: str = "Password: ", stdin: TextIO | None = None) -> str:
    """Prompt twice on a terminal; otherwise read one line from standard input."""
    stream = stdin or sys.stdin
    if stream.isatty():
        first = getpass.getpass(prompt)
        if getpass.getpass("Repeat password: ") != first:
            raise ValueError("the passwords do not match")
        return first
    return stream.readline().rstrip("\r\n")


def cmd_console(args: Namespace) -> int:
    return serve(args.host, args.port)


def cmd_user_add(args: Namespace) -> int:
    try:
        user_add(args.name, args.role, read_password())
    except ValueError as exc:
        print(f"jobwarden user add: {exc}", file=sys.stderr)
        return 2
    print(f"user {normalize_username(args.name)!r} saved with role {args.role}")
    return 0


def cmd_user_reset(args: Namespace) -> int:
    try:
        role = user_reset(args.name, read_password("New password: "), role=args.role)
    except ValueError as exc:
        print(f"jobwarden user reset: {exc}", file=sys.stderr)
        return 2
    print(f"password of {normalize_username(args.name)!r} reset (role {role}); "
          "its sessions are signed out")
    return 0


def cmd_demo(args: Namespace) -> int:
    return run_demo(port=args.port, exit_when_done=args.exit_when_done,
                    use_database_url=args.yes_use_this_database)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    ua.set_defaults(fn=cmd_user_add, checks_schema=True)  # refused behind the code
    ur = usub.add_parser("reset", help="set an existing user's password (prompted or from "
                                       "stdin), enable them and sign out their sessions")
    ur.add_argument("name")
    ur.add_argument("--role", choices=list(ROLES),
                    help="a new role too (default: keep it; the last admin stays admin)")
    ur.set_defaults(fn=cmd_user_reset, checks_schema=True)
