"""LISTEN/NOTIFY wake-ups for an idle worker, with reconnection.

Enqueues (and operator retries) send `pg_notify('jobwarden_jobs', queue)`, delivered
when their transaction commits. A notification only says "look now"; polling stays
the fallback that always works, so a lost notification delays a job, never loses it.

LISTEN needs a session of its own: behind a transaction-pooling PgBouncer it connects
to JOBWARDEN_LISTEN_URL (direct to PostgreSQL), or does not listen at all and the
worker polls (worker/store/db.py `listen_url`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

from worker.core.dberrors import DB_UNREACHABLE, Backoff
from worker.store.db import listen_url
from worker.store.jobstore import JobStore
from worker.store.queries import Q

log = logging.getLogger("jobwarden.listener")

NOTIFY_CHANNEL = "jobwarden_jobs"


def listen_for_jobs(url: str, wake: Callable[[str | None], None],
                    closing: threading.Event) -> None:
    """Call `wake(queue)` on every notification until `closing` is set (`wake(None)`: any
    queue may have jobs); reconnect with backoff."""
    direct = listen_url(url)
    if direct is None:
        log.info("no LISTEN through a transaction pooler without JOBWARDEN_LISTEN_URL: "
                 "waking by polling only", extra={"action": "listen_disabled"})
        return
    url = direct
    backoff = Backoff()
    while not closing.is_set():
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                JobStore(conn).rows(Q.listen_for_jobs)  # the channel NOTIFY_CHANNEL names
                backoff.reset()
                wake(None)  # jobs may have arrived while we were not listening
                while not closing.is_set():
                    for note in conn.notifies(timeout=1.0, stop_after=1):
                        wake(note.payload)
        except DB_UNREACHABLE as exc:
            wait = backoff.next()
            log.warning("LISTEN connection lost (%s); reconnecting in %.1fs", exc, wait,
                        extra={"action": "listen_reconnect"})
            closing.wait(wait)
