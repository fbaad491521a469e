"""Who is using the console: a user of its own login, or one the host application vouches for.

The console keeps its user in `g` for the request, never in Flask-Login's app-wide
state, so it can be mounted in an application that has its own Flask-Login setup.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, cast

from flask import abort, g
from werkzeug.local import LocalProxy

from jobwarden.console.core.account_policy import REFUSED_CATEGORIES, USERNAME_MAX
from jobwarden.console.data.schema import ROLES

ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}


#: The prefix of the actor names of users a host's user_loader vouches for: the host's
#: "sop" and the console's own "sop" are two people, whose selections and audit rows must
#: never be taken for each other's (console user names cannot hold ":").
HOST_ACTOR_PREFIX = "host:"


class HostIdentityError(ValueError):
    """The host's user_loader returned something that names no usable console user."""


@dataclass(frozen=True)
class ConsoleUser:
    """A signed-in user: `id` is their console_users id, None when the host vouches for them
    (`from_host`)."""

    username: str
    role: str
    id: str | None = None
    from_host: bool = False
    is_authenticated = True

    @property
    def actor(self) -> str:
        """Who acted, as audit rows and selections store it: qualified by where the user
        comes from, so that equal names from the host and the console never match."""
        return HOST_ACTOR_PREFIX + self.username if self.from_host else self.username

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

def request_user() -> ConsoleUser | AnonymousUser:
    """The console's user for this request (set by the console's before_request hook)."""
    user: ConsoleUser | AnonymousUser = g.get("jobwarden_user", ANONYMOUS)
    return user


def signed_in() -> ConsoleUser:
    """The signed-in user, for a view that acts in their name. Such views are behind
    require_login (and role_required), so there is one; were one reached without them,
    nobody would be refused (403) rather than recorded as the actor."""
    user = request_user()
    if not isinstance(user, ConsoleUser):
        abort(403)
    return user


#: The console's user for this request, for templates and for reading rights
#: (`current_user.can_act`); a view that records who acted asks signed_in().
#: A proxy that stands for whichever of the two request_user() returns: typed as that.
current_user = cast("ConsoleUser | AnonymousUser", LocalProxy(request_user))


def host_user(identity: Any) -> ConsoleUser | AnonymousUser:
    """The console user for what a host's user_loader returned: (name, role) or None.
    (`Any`: it is the host's value, of whatever type, and checked here.)

    HostIdentityError when the role is none of ROLES, or the name is empty, longer than
    USERNAME_MAX, has spaces around it, or holds characters that would make it look like
    another name on a page (controls, bidi and zero-width characters, spaces other than
    " "): such a user gets nothing from the console.
    """
    if not identity:
        return ANONYMOUS
    try:
        username, role = identity
    except (TypeError, ValueError):
        raise HostIdentityError(f"user_loader must return (name, role) or None, "
                                f"not a {type(identity).__name__}") from None
    if role not in ROLE_RANK:
        raise HostIdentityError(f"user_loader returned the role {role!r}: the console's "
                                f"roles are {', '.join(ROLES)}")
    if not isinstance(username, str) or not 0 < len(username) <= USERNAME_MAX or (
            username != username.strip()) or any(
            c != " " and unicodedata.category(c) in REFUSED_CATEGORIES for c in username):
        raise HostIdentityError(f"user_loader returned a user name the console cannot show "
                                f"unambiguously: {ascii(username)[:120]}")
    return ConsoleUser(username=username, role=role, from_host=True)
