"""Console users from the command line: `jobwarden user add` and `jobwarden user reset`."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import DBAPIError

from jobwarden.console.core.account_policy import check_password, normalize_username
from jobwarden.console.data.database import CQ, Query, Row, connected
from jobwarden.console.data.schema import ROLES
from jobwarden.console.web.auth import hash_password


def user_add(username: str, role: str, password: str, database_url: str | None = None) -> None:
    """Create a console user. An existing name is refused (ValueError): resetting a
    password must be asked for by name, with `user_reset`."""
    username = _checked(username, role, password)
    row = _save(CQ.console_user_insert, username, database_url, {
        "username": username, "password_hash": hash_password(password), "role": role})
    if row is None:
        raise ValueError(f"{username!r} exists already: `jobwarden user reset {username}` "
                         "sets a new password (and --role a new role)")


def user_reset(username: str, password: str, role: str | None = None,
               database_url: str | None = None) -> str:
    """Set an existing user's password, and `role` when given; enables the account and
    ends its sessions. Returns the role it now has."""
    username = _checked(username, role, password)
    row = _save(CQ.console_user_reset, username, database_url, {
        "username": username, "password_hash": hash_password(password), "role": role})
    if row is None:  # never: the statement ends in a SELECT of two subqueries
        raise RuntimeError("resetting the user returned no row")
    found, new_role = row["found"], row["role"]
    if not found:
        raise ValueError(f"no user {username!r}: `jobwarden user add {username} --role ROLE` "
                         "creates one")
    if new_role is None:
        raise ValueError(f"{username!r} is the last admin: add another admin first")
    return str(new_role)


def _checked(username: str, role: str | None, password: str) -> str:
    """The normalized name, once name, role and password pass the account policy."""
    username = normalize_username(username)
    if role is not None and role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    check_password(password, username)
    return username


def _save(query: Query, username: str, database_url: str | None,
          params: dict[str, Any]) -> Row | None:
    """The one row `query` returns (None when it returns none)."""
    with connected(database_url) as db:
        try:
            with db.transaction() as tx:
                row = tx.one(query, **params)
        except DBAPIError as exc:
            raise RuntimeError(f"could not save user {username!r}: {exc.orig}") from exc
    return row
