"""The one policy for console user names and passwords: the admin form, `jobwarden user
add` and sign-in all call these, so they never disagree on what is allowed.

User names are normalized so that look-alike accounts cannot be created: NFKC (fullwidth
and compatibility forms fold to their plain letters), case-folded, and refused when they
hold invisible, bidirectional or control characters, whitespace, a colon (reserved for
the host's users, `host:<name>`), or letters from more than one script (a Cyrillic "а"
posing in "ada").

Passwords: at least MIN_PASSWORD characters, not whitespace only, at least five distinct
characters, not mostly the user name, not digits only, not a well-known password with a
number stuck on. A small built-in list rather than a strength-estimation library: sign-in
is throttled (console/web/login_throttle.py), so the policy only has to stop the trivial.
"""

from __future__ import annotations

import unicodedata

USERNAME_MAX = 100
MIN_PASSWORD = 10
MAX_PASSWORD = 1000
#: Passwords (letters only, case-folded) that every guessing list starts with.
COMMON_PASSWORDS = frozenset((
    "password", "passw", "passwort", "qwerty", "qwertyuiop", "qwertz", "azerty", "asdfgh",
    "asdfghjkl", "zxcvbnm", "letmein", "welcome", "admin", "administrator", "root", "login",
    "iloveyou", "monkey", "dragon", "master", "secret", "changeme", "default", "test",
    "abc", "abcdef", "abcdefghij", "jobwarden", "console", "operator", "viewer", "summer",
    "winter", "football", "baseball", "sunshine", "princess", "trustno",
))
#: Unicode categories never allowed in a user name: controls, format characters (the
#: zero-width and bidi controls among them), surrogates, private use, unassigned,
#: line and paragraph separators, and spaces.
REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"}


def normalize_username(raw: str | None) -> str:
    """The stored form of a user name, or ValueError saying why it cannot be one."""
    name = unicodedata.normalize("NFKC", raw or "").strip().casefold()
    name = unicodedata.normalize("NFKC", name)  # casefold can un-normalize (ß → ss is fine)
    if not name or len(name) > USERNAME_MAX:
        raise ValueError(f"a user name needs 1-{USERNAME_MAX} characters")
    if any(unicodedata.category(c) in REFUSED_CATEGORIES or c.isspace() for c in name):
        raise ValueError("a user name cannot hold spaces, invisible, direction-changing or "
                         "control characters")
    if ":" in name:
        # Reserved: the console names users its host vouches for "host:<name>"
        # (jobwarden.console.web.identity), and a console user must never pass for one of them.
        raise ValueError("a user name cannot hold a colon")
    scripts = {_script(c) for c in name if c.isalpha()}
    if len(scripts) > 1:
        raise ValueError("a user name cannot mix letters of different scripts "
                         f"({', '.join(sorted(scripts)).lower()})")
    return name


def check_password(password: str | None, username: str = "") -> str:
    """`password` if it passes the policy, else ValueError saying what is wrong."""
    password = password or ""
    if len(password) > MAX_PASSWORD:
        raise ValueError(f"the password may have at most {MAX_PASSWORD} characters")
    if len(password.strip()) < MIN_PASSWORD:
        raise ValueError(f"the password needs at least {MIN_PASSWORD} characters "
                         "(not counting leading and trailing spaces)")
    folded = password.casefold()
    if len(set(folded)) < 5:
        raise ValueError("the password needs at least five different characters")
    if folded.isdigit():
        raise ValueError("the password cannot be digits only")
    if "".join(c for c in folded if c.isalpha()) in COMMON_PASSWORDS:
        raise ValueError("that password is on every guessing list")
    name = (username or "").casefold()
    if len(name) >= 3 and len(folded.replace(name, "").strip(" -_.!")) < 6:
        raise ValueError("the password cannot be mostly the user name")
    return password


def _script(char: str) -> str:
    """The script of a letter, from its Unicode name (LATIN SMALL LETTER A -> LATIN)."""
    return unicodedata.name(char, "UNKNOWN").split(" ")[0]
