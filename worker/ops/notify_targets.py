"""An admin's notification targets (docs/guide/notifications.md): add, edit, delete, and
send a test message, each audited with its reason like every operator action.

Only admins: a target decides where the worker's network requests go and what they
carry. A target is checked before it is stored (worker/core/targets.py: the URL's
scheme, the host against the address policy, addresses that cannot end a header), and
its secrets (the URL, the signing secret, the SMTP password) never reach an audit row,
a log line or an answer: the audit names the fields an edit changed, not their values.

An edit or a delete names the revision the admin saw (compare-and-set): a target
changed meanwhile by another admin is refused, never overwritten unseen. An edit that
leaves a secret empty keeps the stored one.

Functions run in the caller's transaction; ValueError says what was refused.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from jobwarden.worker.core.env import notify_settings
from jobwarden.worker.core.notices import TEST, Notice
from jobwarden.worker.core.targets import EMAIL, WEBHOOK, Target, check
from jobwarden.worker.jobs.notifications import record, target_by_key
from jobwarden.worker.ops.operations import ActionResult, _check, _rows
from jobwarden.worker.store.queries import CallerConnection, Q

if TYPE_CHECKING:  # the model: worker/core/env.py reads the settings without it
    from jobwarden.worker.core.settings import NotifySettings

#: Who may change targets.
ADMIN = "admin"


def _admin(actor: str, role: str, reason: str) -> str:
    if role != ADMIN:
        raise PermissionError("only an admin may change notification targets")
    return _check(actor, role, reason)


def _params(t: Target) -> dict[str, object]:
    email = t.kind == EMAIL
    return {"name": t.name, "kind": t.kind, "url": t.url, "secret": t.secret,
            "format": t.format if t.kind == WEBHOOK else "json",
            "smtp_host": t.smtp_host if email else None,
            "smtp_port": t.smtp_port if email else None,
            "smtp_user": t.smtp_user if email else None,
            "smtp_password": t.smtp_password if email else None,
            "starttls": t.starttls, "email_from": t.email_from if email else None,
            "email_to": list(t.email_to) if email else None}


def add_target(conn: CallerConnection, target: Target, *, actor: str, role: str, reason: str,
               request_id: str | None = None,
               settings: NotifySettings | None = None) -> ActionResult:
    """Store a new target (its name unique), checked first."""
    reason = _admin(actor, role, reason)
    settings = settings or notify_settings()
    target = check(replace(target, console=True), allow_private=settings.notify_allow_private)
    rows = _rows(conn, Q.notify_target_add, {**_params(target), "actor": actor, "role": role,
                                             "reason": reason, "request_id": request_id})
    if not rows:
        return ActionResult(False, "add_notify_target", 0,
                            f"A target named {target.name!r} exists already. Nothing was "
                            "added.")
    return ActionResult(True, "add_notify_target", 0, f"Target {target.name!r} added.")


def edit_target(conn: CallerConnection, target_id: int, revision: int, changes: Target, *,
                actor: str, role: str, reason: str, request_id: str | None = None,
                clear_secret: bool = False,
                settings: NotifySettings | None = None) -> ActionResult:
    """Change a target still at `revision`: `changes` holds every field as it should be,
    but a secret (URL, signing secret, SMTP password) given as None stays as stored, and
    `clear_secret` removes the signing secret or password. Its kind does not change."""
    reason = _admin(actor, role, reason)
    settings = settings or notify_settings()
    stored = target_by_key(conn, str(target_id), settings)
    if stored is None:
        return ActionResult(False, "edit_notify_target", 0, "That target is gone. Nothing "
                                                             "was changed.")
    merged = replace(changes, key=stored.key, kind=stored.kind, console=True,
                     url=changes.url or stored.url,
                     secret=None if clear_secret else changes.secret or stored.secret,
                     smtp_password=(None if clear_secret
                                    else changes.smtp_password or stored.smtp_password))
    merged = check(merged, allow_private=settings.notify_allow_private)
    params = _params(merged)
    # Secrets the admin left empty are kept by the statement itself (NULL keeps).
    params.update(url=changes.url and merged.url, secret=changes.secret and merged.secret,
                  smtp_password=changes.smtp_password and merged.smtp_password)
    rows = _rows(conn, Q.notify_target_edit, {
        **params, "id": target_id, "revision": revision, "clear_secret": clear_secret,
        "actor": actor, "role": role, "reason": reason, "request_id": request_id})
    if not rows:
        now = target_by_key(conn, str(target_id), settings)
        why = ("it is gone" if now is None else
               "another admin changed it since you opened it: reload and edit again"
               if now.revision != revision else f"a target named {merged.name!r} exists")
        return ActionResult(False, "edit_notify_target", 0, f"Not saved: {why}.")
    return ActionResult(True, "edit_notify_target", 0, f"Target {merged.name!r} saved.")


def delete_target(conn: CallerConnection, target_id: int, revision: int, *, actor: str,
                  role: str, reason: str, request_id: str | None = None) -> ActionResult:
    """Remove a target still at `revision`; its messages not yet sent are dropped when
    their jobs run."""
    reason = _admin(actor, role, reason)
    rows = _rows(conn, Q.notify_target_delete, {
        "id": target_id, "revision": revision, "actor": actor, "role": role,
        "reason": reason, "request_id": request_id})
    if not rows:
        return ActionResult(False, "delete_notify_target", 0,
                            "Not deleted: it is gone, or another admin changed it since you "
                            "opened it.")
    return ActionResult(True, "delete_notify_target", 0, "Target deleted.")


def send_test(conn: CallerConnection, key: str, *, actor: str, role: str, reason: str,
              request_id: str | None = None,
              settings: NotifySettings | None = None) -> ActionResult:
    """Record a test message for one target (`env:webhook`, `env:email` or a console
    target's id) and enqueue its sending, audited; a worker serving
    JOBWARDEN_NOTIFY_QUEUE sends it. A resubmitted form sends nothing more."""
    reason = _admin(actor, role, reason)
    settings = settings or notify_settings()
    if request_id and _rows(conn, Q.notify_audit_by_request, {
            "request_id": request_id, "action": "test_notify_target", "actor": actor}):
        return ActionResult(True, "test_notify_target", 0, "That test message was asked "
                                                           "for already.", duplicate=True)
    target = target_by_key(conn, key, settings)
    if target is None:
        return ActionResult(False, "test_notify_target", 0, "That target is gone.")
    notification_id = record(conn, Notice(TEST), [target], settings)
    _rows(conn, Q.notify_test_audit, {
        "actor": actor, "role": role, "reason": reason, "request_id": request_id,
        "name": target.name, "target": target.key, "notification_id": notification_id})
    return ActionResult(True, "test_notify_target", 0,
                        f"A test message to {target.name!r} is queued; a worker serving "
                        f"queue {settings.notify_queue!r} sends it within seconds.")
