"""Notifications as stored: the targets (the environment's and the console's), and a
message recorded with one `jobwarden.notify` job per target that sends it, in the
caller's transaction (docs/guide/notifications.md).

The notifier (worker/duties/notifier.py) records what it detects; an admin's "send a
test message" (worker/ops/notify_targets.py) records a test; the sending job
(worker/duties/delivery.py) reads them back. A job's payload names the message and the
target's key, never a secret: payloads are shown in the console.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from jobwarden.worker.core.notices import NOTIFY_MAX_ATTEMPTS, NOTIFY_TYPE, Notice
from jobwarden.worker.core.targets import Target, env_targets, from_row
from jobwarden.worker.jobs.enqueue import enqueue
from jobwarden.worker.jobs.registry import Registry
from jobwarden.worker.jobs.registry import registry as default_registry
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import CallerConnection, Q

if TYPE_CHECKING:  # the model: worker/core/env.py reads the settings without it
    from jobwarden.worker.core.settings import NotifySettings


def all_targets(conn: CallerConnection, settings: NotifySettings) -> list[Target]:
    """Every target: the environment's, then the console's by name."""
    return env_targets(settings) + [from_row(r) for r in
                                    JobStore(conn).dicts(Q.notify_targets_list)]


def target_by_key(conn: CallerConnection, key: str, settings: NotifySettings) -> Target | None:
    """The target a sending job names, as it is now (an edit since reaches the retries),
    or None when it is gone."""
    if key.startswith("env:"):
        return next((t for t in env_targets(settings) if t.key == key), None)
    # An id in ASCII digits within bigint: isdigit() alone takes `١` for 1, and int()
    # a number PostgreSQL refuses (a 500 where the target is simply not there).
    if not (key.isascii() and key.isdigit()) or int(key) >= 2**63:
        return None
    row = JobStore(conn).dicts(Q.notify_target_by_id, {"id": int(key)})
    return from_row(row[0]) if row else None


def record(conn: CallerConnection, notice: Notice, targets: list[Target],
           settings: NotifySettings, registry: Registry = default_registry) -> int:
    """Store one message and enqueue its sending to each of `targets`, in the caller's
    transaction; returns the message's id. The jobs go to JOBWARDEN_NOTIFY_QUEUE with
    their attempts given here: the enqueuer need not know the type."""
    store = JobStore(conn)
    message = notice.message(settings.console_url)
    notification_id = int(store.one(Q.notify_record, {
        "kind": notice.kind, "job_type": notice.job_type, "error_code": notice.error_code,
        "summary": notice.summary, "message": json.dumps(message)})[0])
    for target in targets:
        job_id = enqueue(conn, NOTIFY_TYPE, {"notification": notification_id,
                                             "target": target.key},
                         queue=settings.notify_queue, max_attempts=NOTIFY_MAX_ATTEMPTS,
                         registry=registry)
        store.rows(Q.notify_delivery_add, {"notification_id": notification_id,
                                           "target": target.key, "job_id": job_id})
    return notification_id
