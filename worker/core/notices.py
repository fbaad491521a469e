"""What a notification says (docs/guide/notifications.md): the message of a group that
started failing, goes on failing, or of several at once, as JSON, as Slack's
incoming-webhook body, and as an email.

A message carries the console's link to what it is about, how many, a sample error
(redacted again and capped: whatever the database holds, a message stays small), and
when it started. Every text field passes through `line`: no control character, so a
value that reached the database by hand cannot add a header to an email or a line to a
Slack message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from jobwarden.worker.core.sanitize import redact

if TYPE_CHECKING:
    from email.message import EmailMessage

#: The job type that sends a message to one target.
NOTIFY_TYPE = "jobwarden.notify"
#: Attempts of one sending, and their backoff: from 10 s doubling to 30 minutes, about
#: 9 hours in all before a receiver that stays down fails the job (it can be retried).
NOTIFY_MAX_ATTEMPTS = 24

FAILED_GROUP = "failed_group"
RETRY_STORM = "retry_storm"
SLA_BREACH = "sla_breach"
FLOW_HELD = "flow_held"
#: Groups past a pass's budget, in one message.
DIGEST = "digest"
#: The console's "send a test message".
TEST = "test"
KINDS = (FAILED_GROUP, RETRY_STORM, SLA_BREACH, FLOW_HELD, DIGEST, TEST)
#: Kinds whose figure counts occurrences since the group started (it only grows), as
#: opposed to a level read now (jobs waiting, jobs held).
COUNTING = (FAILED_GROUP, RETRY_STORM)

#: A retry storm, as the console's Alerts panel and JobwardenRetryStorm have it: over
#: half of a type's executions of the last 5 minutes went back for another attempt with
#: one error code, 20 or more of them.
STORM_SHARE = 0.5
STORM_MIN_RETRIES = 20

#: The longest sample error a message carries, and the longest line of any other field.
SAMPLE_CHARS = 500
LINE_CHARS = 300
#: Group titles a digest lists (it counts the rest).
DIGEST_LISTED = 20


def line(value: object, limit: int = LINE_CHARS) -> str:
    """`value` redacted, on one line (control characters as spaces), at most `limit`
    characters."""
    text = "".join(ch if ch.isprintable() else " " for ch in redact(str(value)))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def when(moment: datetime | None) -> str:
    return "an unknown time" if moment is None else \
        moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def duration(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def group_path(job_type: str, code: str) -> str:
    """The console's page of a failed group (console/views/failed.py)."""
    args = {"code": code, "type": job_type} if code else {"type": job_type}
    return "/failed/group?" + urlencode(args)


@dataclass(frozen=True)
class Notice:
    """One message before it is stored: what it is about and its figures. `count` is the
    group's figure (failures or retries since it started; jobs waiting or held now),
    `new` what the message adds to the last one about the group."""

    kind: str
    job_type: str | None = None
    error_code: str | None = None
    count: int = 0
    new: int = 0
    started_at: datetime | None = None
    summary: bool = False
    sample: str | None = None
    #: Kind-specific figures: wait_s and target_s of a breach; parent_type,
    #: parent_code and longest_id of held flows; titles and more of a digest.
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        """The console page it links to, from the console's root."""
        if self.kind in (FAILED_GROUP, RETRY_STORM):
            return group_path(self.job_type or "", self.error_code or "")
        if self.kind == SLA_BREACH:
            return "/sla#sla-" + quote(self.job_type or "")
        if self.kind == FLOW_HELD and self.detail.get("longest_id"):
            return f"/flows/{int(self.detail['longest_id'])}"
        if self.kind == FLOW_HELD:
            return "/jobs?status=waiting"
        return "/"

    @property
    def title(self) -> str:
        code, job_type = line(self.error_code or "(no code)", 120), line(self.job_type, 120)
        if self.kind == FAILED_GROUP:
            return (f"Still failing: {code} on {job_type}" if self.summary
                    else f"New failed group: {code} on {job_type}")
        if self.kind == RETRY_STORM:
            return f"Retry storm{' goes on' if self.summary else ''}: {job_type} with {code}"
        if self.kind == SLA_BREACH:
            return f"SLA {'still ' if self.summary else ''}breached: {job_type}"
        if self.kind == FLOW_HELD:
            return f"Flows {'still ' if self.summary else ''}held: {job_type} waiting on " \
                   "failed parents"
        if self.kind == DIGEST:
            return f"{self.count} more groups need attention"
        return "Test message from Jobwarden"

    @property
    def text(self) -> str:
        """What happened, in a sentence or two (no link: each format adds its own)."""
        since, d = when(self.started_at), self.detail
        code = line(self.error_code or "(no code)", 120)
        if self.kind == FAILED_GROUP:
            if self.summary:
                return f"{self.new} more failed since the last message; {self.count} " \
                       f"since {since}."
            return f"{self.count} job(s) failed with {code} since {since}."
        if self.kind == RETRY_STORM:
            said = f"{self.new} more retries since the last message; " if self.summary else ""
            return (f"{said}{self.count} retries with {code} since {since}: over half of "
                    "the type's executions of the last 5 minutes went back for another "
                    "attempt.")
        if self.kind == SLA_BREACH:
            return (f"The oldest runnable job has waited {duration(d.get('wait_s', 0))} "
                    f"(target {duration(d.get('target_s', 0))}); {self.count} runnable "
                    f"job(s) waiting. Breached since {since}.")
        if self.kind == FLOW_HELD:
            parent = (f"{line(d.get('parent_code') or '(no code)', 120)} on "
                      f"{line(d.get('parent_type') or '?', 120)}")
            return (f"{self.count} waiting job(s) held by a parent that failed ({parent}), "
                    f"the longest since {since}.")
        if self.kind == DIGEST:
            listed = [line(t) for t in d.get("titles", [])[:DIGEST_LISTED]]
            more = self.count - len(listed)
            return "; ".join(listed) + (f"; and {more} more" if more > 0 else "") + "."
        return "Notifications reach this target. Nothing is failing because of this message."

    def message(self, console_url: str | None) -> dict[str, Any]:
        """The message as stored and as the JSON webhook sends it (with its id)."""
        return {
            "kind": self.kind, "summary": self.summary, "title": self.title,
            "text": self.text, "job_type": self.job_type, "error_code": self.error_code,
            "count": self.count, "new": self.new,
            "started_at": None if self.started_at is None else
            self.started_at.astimezone(UTC).isoformat(),
            "sample": None if self.sample is None else line(self.sample, SAMPLE_CHARS),
            "url": (console_url or "") + self.path,
        }


def json_body(message: dict[str, Any], notification_id: int) -> dict[str, Any]:
    """The JSON webhook's body: the message with its id first (a receiver's dedup key:
    a message may arrive twice, never not at all)."""
    return {"id": notification_id, **message}


def _slack_escaped(text: str) -> str:
    """Slack's three control characters in message text (its "Escaping text")."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(message: dict[str, Any]) -> dict[str, Any]:
    """Slack's incoming-webhook shape: one `text`, its link in Slack's `<url|label>`."""
    parts = [f"*{_slack_escaped(message['title'])}*", _slack_escaped(message["text"])]
    if message.get("sample"):
        parts.append(f"Sample: `{_slack_escaped(message['sample']).replace('`', chr(39))}`")
    url = message.get("url") or ""
    if url.startswith(("http://", "https://")):
        parts.append(f"<{url.replace('|', '%7C').replace('>', '%3E')}|Open in the console>")
    elif url:
        parts.append(f"Console: {_slack_escaped(url)}")
    return {"text": "\n".join(parts)}


def email(message: dict[str, Any], sender: str, recipients: tuple[str, ...]) -> EmailMessage:
    """The email of a message. Every header value is one clean line (`line`), and the
    addresses were checked (worker/core/destinations.py), so no value ends its header."""
    from email.message import EmailMessage  # here: every worker imports this module

    mail = EmailMessage()
    mail["Subject"] = "[Jobwarden] " + line(message["title"], 200)
    mail["From"] = sender
    mail["To"] = ", ".join(recipients)
    body = [line(message["title"]), "", line(message["text"], 2000)]
    if message.get("sample"):
        body += ["", "Sample error: " + line(message["sample"], SAMPLE_CHARS)]
    if message.get("url"):
        body += ["", "Open: " + line(message["url"], 2000)]
    mail.set_content("\n".join(body) + "\n")
    return mail
