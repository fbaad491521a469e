"""Sending a notification: the `jobwarden.notify` job, one per message and target
(docs/guide/notifications.md).

A send is a job so that it is retried like any: a receiver that is down, refuses, or
times out makes the attempt fail, and the job comes back with backoff (from 10 s,
doubling to 30 minutes, NOTIFY_MAX_ATTEMPTS in all; then it fails, shown on /failed,
and can be retried). Nothing is lost meanwhile: the message is stored, the job holds
its place. At least once: the delivery row is marked sent in the job's own transaction,
which commits with its completion; a worker lost between the receiver's answer and that
commit sends again, with the same id for the receiver to drop.

The target is read when the job runs, so a fix of its URL reaches the retries, and a
target removed meanwhile ends the job without sending. A console target's host is
checked again (worker/core/destinations.py) and the connection goes to the address
checked. Every error said about a send names the URL redacted.
"""

from __future__ import annotations

import json
import logging
import re
import socket
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from jobwarden.worker.core import destinations, notices
from jobwarden.worker.core.env import notify_settings
from jobwarden.worker.core.errors import RetryableError
from jobwarden.worker.core.notices import NOTIFY_MAX_ATTEMPTS, NOTIFY_TYPE
from jobwarden.worker.core.policy import RetryPolicy
from jobwarden.worker.core.signature import signed_headers
from jobwarden.worker.core.targets import EMAIL, Target, check
from jobwarden.worker.jobs.notifications import target_by_key
from jobwarden.worker.jobs.registry import JobType, Registry
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

if TYPE_CHECKING:
    import http.client

    # the model: worker/core/env.py reads the settings without it
    from jobwarden.worker.core.settings import NotifySettings
    from jobwarden.worker.engine.context import JobContext

log = logging.getLogger("jobwarden.notify")

#: Seconds one connection, request or SMTP command may take.
TIMEOUT = 10.0
#: Of a receiver's answer, at most this much is read (and none of it is kept).
ANSWER_BYTES = 64 * 1024
BACKOFF = RetryPolicy(base=10.0, cap=1800.0, jitter=0.2)
DELIVERY_HEADER = "X-Jobwarden-Delivery"
USER_AGENT = "jobwarden-notifier"

#: Error codes of a failed attempt, each its group on /failed.
UNREACHABLE = "NOTIFY_UNREACHABLE"
REFUSED = "NOTIFY_REFUSED"
FORBIDDEN = "NOTIFY_FORBIDDEN_ADDRESS"
MISCONFIGURED = "NOTIFY_TARGET_INVALID"


def register_notify_job(registry: Registry, backoff: RetryPolicy | None = None,
                        queue: str | None = None) -> None:
    """Give the registry the `jobwarden.notify` job type (the worker process does, at
    start): its workers send the messages of JOBWARDEN_NOTIFY_QUEUE."""
    if NOTIFY_TYPE in registry:
        return
    registry.register(JobType(
        name=NOTIFY_TYPE, handler=send_notification,
        queue=queue or notify_settings().notify_queue,
        max_attempts=NOTIFY_MAX_ATTEMPTS, timeout=120.0, backoff=backoff or BACKOFF))


def send_notification(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    """The handler: send message `notification` to target `target`, once."""
    notification_id, key = int(payload["notification"]), str(payload["target"])
    settings = notify_settings()
    with ctx.transaction() as conn:
        store = JobStore(conn)
        rows = store.dicts(Q.notify_delivery_for_send, {"notification_id": notification_id,
                                                         "target": key})
        if not rows:  # kept 30 days: a job retried later than that has nothing to send
            return {"sent": False, "why": "the message is no longer kept"}
        if rows[0]["sent_at"] is not None:
            return {"sent": False, "why": "sent before"}
        target = target_by_key(conn, key, settings)
        if target is None:
            log.info("notification %s: target %s is gone; not sent", notification_id, key,
                     extra={"action": "notify_target_gone", "target": key})
            return {"sent": False, "why": "the target was removed"}
        deliver(target, rows[0]["message"], notification_id, settings)
        store.rows(Q.notify_delivery_sent, {"notification_id": notification_id,
                                            "target": key})
    # The job's result is shown on every role's pages: the target by its key alone.
    return {"sent": True, "target": target.key}


def deliver(target: Target, message: dict[str, Any], notification_id: int,
            settings: NotifySettings) -> None:
    """Send one message to one target, or raise RetryableError saying why, naming the
    target by its key alone (`target 7: ... does not resolve`): the sending job's error
    is shown on every role's pages, and a target's name and where it points are an
    admin's (the Notifications page, which shows each target's last error beside them)."""
    try:
        _send(target, message, notification_id, settings)
    except RetryableError as exc:
        raise RetryableError(exc.code, f"target {target.key}: "
                                       f"{_without_target(exc.message, target)}") from None


#: What may still name where a target points once its own names are taken out: a mail
#: address, an IPv4 or IPv6 address (an exception's text, a refusal naming the address).
_WHERE = re.compile(r"[\w.+-]+@[\w.-]+|\b\d{1,3}(?:\.\d{1,3}){3}\b"
                    r"|\[?\b[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}\]?")


def _without_target(text: str, target: Target) -> str:
    """`text` with the target's name, URL, host, sender, recipients and any address
    taken out (each as `<target>`, `<url>`, `<host>`, `<address>`)."""
    url = target.url or ""
    names = {url: "<url>", destinations.redact_url(url) if url else "": "<url>",
             urlsplit(url).hostname or "" if url else "": "<host>",
             target.smtp_host or "": "<host>", target.name: "<target>"}
    # The longest first: a name may be part of a host, a host is part of its URL.
    for found in sorted((n for n in names if n), key=len, reverse=True):
        text = re.sub(re.escape(found), names[found], text, flags=re.IGNORECASE)
    # The prefix the send's own errors start with says nothing once taken out.
    text = re.sub(r"\A(?:<url>|<target>(?: \(<host>:\d+\))?): ", "", text)
    return _WHERE.sub("<address>", text)


def _send(target: Target, message: dict[str, Any], notification_id: int,
          settings: NotifySettings) -> None:
    """deliver(), its errors saying the target's name and where it points."""
    try:
        target = check(target, allow_private=settings.notify_allow_private)
    except destinations.ForbiddenAddress as exc:
        raise RetryableError(FORBIDDEN, f"{target.name}: {exc}") from None
    except ValueError as exc:
        raise RetryableError(MISCONFIGURED, f"{target.name}: {exc}") from None
    if target.kind == EMAIL:
        send_email(target, message, settings)
    else:
        post_webhook(target, message, notification_id, settings)


def webhook_body(target: Target, message: dict[str, Any], notification_id: int) -> bytes:
    body = (notices.slack_body(message) if target.format == "slack"
            else notices.json_body(message, notification_id))
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def post_webhook(target: Target, message: dict[str, Any], notification_id: int,
                 settings: NotifySettings) -> int:
    """POST the message; returns the receiver's status (2xx). A redirect is not followed."""
    url = target.url or ""
    shown = destinations.redact_url(url)
    parts = urlsplit(url)
    https = parts.scheme.lower() == "https"
    port = parts.port or (443 if https else 80)
    host = parts.hostname or ""
    body = webhook_body(target, message, notification_id)
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
               DELIVERY_HEADER: f"{notification_id}:{target.key}"}
    if target.secret:
        headers.update(signed_headers(target.secret, body))
    try:
        address = (destinations.resolve(host, port, allow_private=settings.notify_allow_private)
                   if target.console else None)
    except destinations.ForbiddenAddress as exc:
        raise RetryableError(FORBIDDEN, f"{shown}: {exc}") from None
    except OSError as exc:
        raise RetryableError(UNREACHABLE, f"{shown}: {exc}") from None
    # Here, not at import: every worker imports this module, and sends a message rarely.
    import http.client
    import ssl  # (with http.client)

    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection(host, port, timeout=TIMEOUT,
                                    context=ssl.create_default_context())
        if https else http.client.HTTPConnection(host, port, timeout=TIMEOUT))
    if address is not None:
        # To the address checked, whatever the name resolves to now; the Host header and
        # TLS (name and certificate) still say the name.
        def pinned(_where: tuple[str, int], timeout: float | None = None,
                   source: tuple[str, int] | None = None) -> socket.socket:
            return socket.create_connection((address, port), timeout, source)

        conn._create_connection = pinned  # type: ignore[attr-defined]
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("POST", path, body=body, headers=headers)
        answer = conn.getresponse()
        answer.read(ANSWER_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise RetryableError(UNREACHABLE, f"{shown}: {type(exc).__name__}: {exc}") from None
    finally:
        conn.close()
    if not 200 <= answer.status < 300:
        raise RetryableError(REFUSED, f"{shown} answered {answer.status} {answer.reason}")
    return answer.status


def send_email(target: Target, message: dict[str, Any], settings: NotifySettings) -> None:
    """Mail the message through the target's SMTP server: STARTTLS first when asked (no
    server that cannot gets the message, nor the password), then the login if any."""
    host = target.smtp_host or ""
    try:
        address = (destinations.resolve(host, target.smtp_port,
                                        allow_private=settings.notify_allow_private)
                   if target.console else host)
    except destinations.ForbiddenAddress as exc:
        raise RetryableError(FORBIDDEN, f"{target.name}: {exc}") from None
    except OSError as exc:
        raise RetryableError(UNREACHABLE, f"{target.name}: {exc}") from None
    # Here, not at import (every worker's start), like http.client above.
    import smtplib
    import ssl  # (with smtplib)

    mail = notices.email(message, target.email_from or "", target.email_to)
    where = f"{target.name} ({host}:{target.smtp_port})"
    try:
        with smtplib.SMTP(timeout=TIMEOUT) as smtp:
            smtp.connect(address, target.smtp_port)
            smtp._host = host  # type: ignore[attr-defined]  # the name STARTTLS checks
            smtp.ehlo()
            if target.starttls:
                if not smtp.has_extn("starttls"):
                    raise RetryableError(REFUSED, f"{where} offers no STARTTLS: nothing "
                                                  "sent")
                smtp.starttls(context=ssl.create_default_context())
                smtp.ehlo()
            if target.smtp_user:
                smtp.login(target.smtp_user, target.smtp_password or "")
            refused = smtp.send_message(mail, target.email_from, list(target.email_to))
    except RetryableError:
        raise
    except smtplib.SMTPException as exc:
        raise RetryableError(REFUSED, f"{where}: {type(exc).__name__}: {exc}") from None
    except OSError as exc:
        raise RetryableError(UNREACHABLE, f"{where}: {type(exc).__name__}: {exc}") from None
    if refused:
        # By the target's key alone, as deliver()'s errors: the sending job's attempt log
        # keeps this line, and every role reads it on the job's page.
        log.warning("notification mail refused for %d recipient(s) by target %s",
                    len(refused), target.key,
                    extra={"action": "notify_recipients_refused", "count": len(refused)})
