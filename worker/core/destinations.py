"""Where a notification may be sent: webhook URLs, SMTP hosts and mail addresses, checked
before they are stored and again before each send (docs/guide/notifications.md).

A target set in the console is typed by an admin of the console, who is not thereby
trusted with the worker's network: the worker would make the request from inside it.
So a console target's host must resolve to public addresses only (never loopback,
private, shared or link-local ones, the cloud's metadata addresses among them), unless
the deployment allows private addresses (JOBWARDEN_NOTIFY_ALLOW_PRIVATE); link-local and
metadata addresses are refused even then. The check is made on every address the name
resolves to when the message is sent, and the connection goes to the address checked
(a name that resolves to another address the second time reaches nothing new).
Targets set in the environment come from whoever deploys the worker and are not checked
for addresses: that person reaches the network already.

Only http and https URLs, without credentials or a fragment; a redirect is never
followed (a 3xx is a failed attempt). The URL's path and query are a secret (Slack's
incoming webhooks carry their token there): `redact_url` keeps the scheme and host.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

from jobwarden.worker.core.sanitize import REDACTED

#: The longest URL or address a target takes.
MAX_URL_CHARS = 2000
MAX_ADDRESS_CHARS = 254
#: Recipients of one email target.
MAX_RECIPIENTS = 20

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Metadata services outside the link-local range (AWS over IPv6, Alibaba Cloud): refused
#: whatever the deployment allows, as every link-local address is.
METADATA = frozenset(map(ipaddress.ip_address, ("fd00:ec2::254", "100.100.100.200")))

_LOCAL_NAMES = re.compile(r"(?i)^(localhost|localhost\.localdomain|ip6-localhost|"
                          r"ip6-loopback)\.?$|\.localhost\.?$")
#: One address, no display name: what a header can hold without a way out of it.
_ADDRESS = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*"
                      r"[A-Za-z0-9])?$")
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*"
                   r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?$")


class ForbiddenAddress(ValueError):
    """A target's host resolves to an address the policy refuses."""


def address_problem(ip: IPAddress, *, allow_private: bool) -> str | None:
    """Why a console target may not be reached at `ip`, or None when it may."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    if ip.is_link_local or ip in METADATA:
        return f"{ip} is a link-local or metadata address"
    if ip.is_unspecified or ip.is_multicast or (ip.is_reserved and not ip.is_loopback):
        return f"{ip} is not an address a message can go to"
    if not allow_private and (ip.is_loopback or not ip.is_global):
        return (f"{ip} is a loopback, private or shared address (allowed only with "
                "JOBWARDEN_NOTIFY_ALLOW_PRIVATE)")
    return None


def numeric_host(host: str) -> IPAddress | None:
    """The address a host written as a number stands for (`127.1`, `2130706433`,
    `0x7f.0.0.1` and `[::1]` included), or None for a name. The resolver reads those
    forms as addresses without asking DNS, so they are checked as addresses."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP,
                                   flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    return ipaddress.ip_address(found[0][4][0])


def host_problem(host: str, *, allow_private: bool) -> str | None:
    """What can be told of a console target's host without DNS: a number or a local name
    the policy refuses; None when it may pass (its addresses are checked at send)."""
    ip = numeric_host(host)
    if ip is not None:
        return address_problem(ip, allow_private=allow_private)
    if not _HOST.match(host):
        return "the host is not a host name"
    if _LOCAL_NAMES.search(host) and not allow_private:
        return ("the host is this machine (allowed only with "
                "JOBWARDEN_NOTIFY_ALLOW_PRIVATE)")
    return None


def resolve(host: str, port: int, *, allow_private: bool) -> str:
    """The address to connect to for a console target: every address `host` resolves
    to must pass the policy (one that does not is a ForbiddenAddress, whichever comes
    first), and the first is returned, so the connection goes where the check looked."""
    try:
        found = socket.getaddrinfo(host.strip("[]"), port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise OSError(f"{host} does not resolve ({exc})") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]
    for ip in addresses:
        problem = address_problem(ip, allow_private=allow_private)
        if problem is not None:
            raise ForbiddenAddress(f"{host} resolves to {problem}")
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    return str(addresses[0])


def check_webhook_url(url: str, *, console: bool, allow_private: bool = False) -> str:
    """The URL, stripped, or ValueError saying what is wrong without repeating it (its
    path may be a secret). `console`: a target an admin typed, whose host is checked."""
    url = (url or "").strip()
    if not url:
        raise ValueError("a webhook needs a URL")
    if len(url) > MAX_URL_CHARS:
        raise ValueError(f"the URL is longer than {MAX_URL_CHARS} characters")
    if any(not ch.isprintable() or ch.isspace() for ch in url):
        raise ValueError("the URL holds a space or a control character")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("the URL does not read as a URL") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError("a webhook URL starts with https:// or http://")
    if not parts.hostname:
        raise ValueError("the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("the URL may not hold a user or password (sign with a secret "
                         "instead)")
    if parts.fragment:
        raise ValueError("the URL may not hold a #fragment")
    if port == 0:
        raise ValueError("the URL's port is 0")
    if console:
        problem = host_problem(parts.hostname, allow_private=allow_private)
        if problem is not None:
            raise ForbiddenAddress(f"refused: {problem}")
    return url


def redact_url(url: str | None) -> str:
    """A webhook URL as shown: its scheme, host and port; the path and query, which may
    be the secret, as [REDACTED]."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"
        if parts.port is not None:
            netloc += f":{parts.port}"
    except ValueError:
        return REDACTED
    rest = url[url.index(parts.netloc) + len(parts.netloc):] if parts.netloc else url
    return f"{parts.scheme}://{netloc}/{REDACTED if rest.strip('/') else ''}"


def check_smtp_host(host: str, *, console: bool, allow_private: bool = False) -> str:
    """An SMTP server's host name or address, or ValueError."""
    host = (host or "").strip()
    if not host or len(host) > 253:
        raise ValueError("an email target needs an SMTP host (a name or an address)")
    if numeric_host(host) is None and not _HOST.match(host):
        raise ValueError("the SMTP host is not a host name or an address")
    if console:
        problem = host_problem(host, allow_private=allow_private)
        if problem is not None:
            raise ForbiddenAddress(f"refused: {problem}")
    return host


def check_address(text: str, what: str = "address") -> str:
    """One mail address (`ops@example.com`, no display name), or ValueError: nothing
    that could end a header or add a recipient (CR, LF, comma, angle brackets) passes."""
    address = (text or "").strip()
    if not address:
        raise ValueError(f"the {what} is empty")
    if len(address) > MAX_ADDRESS_CHARS or not _ADDRESS.match(address):
        raise ValueError(f"the {what} {_shown(address)} is not a mail address like "
                         "ops@example.com")
    return address


def check_addresses(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Recipients, comma-separated (or a list), each checked; at least one, at most
    MAX_RECIPIENTS, none twice."""
    items = text.split(",") if isinstance(text, str) else list(text)
    found: list[str] = []
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue  # a trailing comma
        address = check_address(item, "recipient")
        if address.lower() not in (a.lower() for a in found):
            found.append(address)
    if not found:
        raise ValueError("an email target needs at least one recipient")
    if len(found) > MAX_RECIPIENTS:
        raise ValueError(f"an email target takes at most {MAX_RECIPIENTS} recipients")
    return tuple(found)


def _shown(text: str) -> str:
    """An address as an error message repeats it: escaped and cut short."""
    return repr(text[:60] + ("…" if len(text) > 60 else ""))
