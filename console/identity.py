"""Who is using the console: a user of its own login, or one the host application vouches for.

The console keeps its user in `g` for the request, never in Flask-Login's app-wide
state, so it can be mounted in an application that has its own Flask-Login setup.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import g
from werkzeug.local import LocalProxy

from console.schema import ROLES

ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}


@dataclass(frozen=True)
class ConsoleUser:
    """A signed-in user: `id` is their console_users id, None when the host vouches for them."""

    username: str
    role: str
    id: str | None = None
    is_authenticated = True

    def has_role(self, needed: str) -> bool:
        return ROLE_RANK.get(self.role, -1) >= ROLE_RANK[needed]

    @property
    def can_act(self) -> bool:
        return self.has_role("operator")


class AnonymousUser:
    """Nobody signed in: no name, no role, no rights."""

    username = role = id = None
    is_authenticated = False
    can_act = False

    def has_role(self, needed: str) -> bool:
        return False


ANONYMOUS = AnonymousUser()

#: The console's user for this request (set by the console's before_request hook).
current_user: ConsoleUser | AnonymousUser = LocalProxy(  # type: ignore[assignment]
    lambda: g.get("jobwarden_user", ANONYMOUS))


def host_user(identity) -> ConsoleUser | AnonymousUser:
    """The console user for what a host's user_loader returned: (name, role) or None."""
    if not identity:
        return ANONYMOUS
    username, role = identity
    if not username or role not in ROLE_RANK:
        raise ValueError(f"user_loader must return (name, role) with role in {ROLES}, "
                         f"or None; it returned {identity!r}")
    return ConsoleUser(username=str(username), role=role)
