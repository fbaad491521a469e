"""The notifications page's reads: the targets (the environment's, as this console reads
it, and the console's) with their figures, and the latest messages with where each
went. A target's secrets are never in what these return: its URL only redacted, its
signing secret and SMTP password only as whether one is set."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobwarden.console.data.database import CQ, Reader, Row
from jobwarden.worker.core.settings import NotifySettings
from jobwarden.worker.core.targets import Target, env_targets, from_row

RECENT = 20


@dataclass
class TargetRow:
    """A target as the page shows it."""

    key: str
    name: str
    kind: str
    console: bool
    #: Where it goes, its secrets left out: a URL's scheme and host, a server and
    #: recipients.
    where: str
    format: str
    has_secret: bool
    revision: int
    #: The fields an edit form starts with (no secret among them).
    fields: dict[str, Any] = field(default_factory=dict)
    sent: int = 0
    last_sent_at: datetime | None = None
    waiting: int = 0
    given_up: int = 0
    failed_attempts: int = 0
    last_failure_at: datetime | None = None
    last_error: str | None = None


def shown(target: Target) -> TargetRow:
    """A target without its secrets."""
    if target.kind == "webhook":
        where, has_secret = target.shown_url, bool(target.secret)
        fields: dict[str, Any] = {"name": target.name, "format": target.format}
    else:
        where = (f"{target.smtp_host}:{target.smtp_port} to {', '.join(target.email_to)}"
                 f"{' (STARTTLS)' if target.starttls else ''}")
        has_secret = bool(target.smtp_password)
        fields = {"name": target.name, "smtp_host": target.smtp_host,
                  "smtp_port": target.smtp_port, "smtp_user": target.smtp_user or "",
                  "starttls": target.starttls, "email_from": target.email_from,
                  "email_to": ", ".join(target.email_to)}
    return TargetRow(target.key, target.name, target.kind, target.console, where,
                     target.format, has_secret, target.revision, fields)


def target_rows(reader: Reader, settings: NotifySettings) -> list[TargetRow]:
    """Every target with its figures: the environment's first, then the console's."""
    rows = [shown(t) for t in env_targets(settings)]
    rows += [shown(from_row(r)) for r in reader.all(CQ.notify_targets_list)]
    figures = {r["target"]: r for r in reader.all(CQ.console_notify_target_figures)}
    errors = {r["target"]: r for r in reader.all(CQ.console_notify_last_errors)}
    for row in rows:
        f = figures.get(row.key)
        if f is not None:
            row.sent, row.last_sent_at, row.waiting = f["sent"], f["last_sent_at"], f["waiting"]
            row.given_up, row.failed_attempts = f["given_up"], f["failed_attempts"]
            row.last_failure_at = f["last_failure_at"]
        e = errors.get(row.key)
        if e is not None:
            row.last_error = f"{e['error_code'] or ''} {e['error'] or ''}".strip()
    return rows


def recent(reader: Reader, names: dict[str, str], limit: int = RECENT) -> list[Row]:
    """The latest messages, each delivery with its target's name (or its key, for a
    target removed since) and a state: sent, waiting, given up, or dropped (its job
    ended without sending: the target was removed)."""
    messages = reader.all(CQ.console_notify_recent, limit=limit)
    for m in messages:
        for d in m["deliveries"]:
            d["name"] = names.get(d["target"], f"removed target {d['target']}")
            d["state"] = ("sent" if d["sent_at"] else
                          "waiting" if d["job_status"] in ("pending", "running") else
                          "given up" if d["job_status"] == "failed" else "dropped")
    return messages
