"""Background duties every worker runs now and then, beside claiming: schedules,
retention, the history's weekly partitions, bringing jobs enqueued before their policy
was known over to it, and the notifier. Each duty runs at its own interval on the
worker's control connections; duties that must run on one worker at a time guard themselves in the
database (an advisory lock, a unique key, SKIP LOCKED), so every worker may try.

`JOBWARDEN_DUTY_INTERVAL` (a duration) shortens the intervals, for tests and demos.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

import psycopg
from psycopg_pool import ConnectionPool

from jobwarden.worker.core.env import notify_settings, worker_settings
from jobwarden.worker.duties import (
    batches,
    expiry,
    flows,
    notifier,
    partitions,
    retention,
    scheduler,
)
from jobwarden.worker.engine.limits import REFRESH_SECONDS, LimitBook
from jobwarden.worker.jobs import job_types
from jobwarden.worker.jobs.registry import Registry

log = logging.getLogger("jobwarden.duties")


class Duties:
    """The periodic duties of one worker process.

    `run` is the worker's duty thread: a long retention pass never delays a heartbeat or
    a claim.
    """

    def __init__(self, registry: Registry, *, worker_id: str, interval: float | None = None,
                 limits: LimitBook | None = None,
                 serves: Callable[[str], bool] | None = None):
        settings = worker_settings()
        base = interval or settings.duty_interval
        self.registry = registry
        self.worker_id = worker_id
        self._published = False
        # (name, interval, what it does on a control connection)
        self._duties: list[tuple[str, float, Callable[[psycopg.Connection], object]]] = [
            ("schedules", base or 5.0, self._schedules),
            # Small batches every few seconds: a defaulted backlog is mostly claimed (the
            # claim applies the policy itself) before this reaches it.
            ("policies", base or 5.0,
             lambda conn: job_types.adopt_defaulted(conn, [t.name for t in registry]))]
        if limits is not None:
            # Live limits an operator set reach this worker's claims within this interval.
            self._duties.append(("limits", min(base or REFRESH_SECONDS, REFRESH_SECONDS),
                                 limits.refresh))
        # Jobs past their deadline: the claims never start them; this gives them their
        # final state (failed, EXPIRED) and counts them.
        self._duties.append(("expiry", base or 5.0, expiry.expire))
        # Dependents no finish released (docs/guide/flows.md): a backstop, not the path.
        self._duties.append(("flows", base or 30.0, flows.repair))
        # Batch members no finish counted (docs/guide/flows.md#batches): a backstop too.
        self._duties.append(("batches", base or 30.0, batches.repair))
        # The history's weeks ahead, whatever the retention: a finish needs its week.
        self._duties.append(("partitions", base or 3600.0, partitions.ensure))
        # What started failing, told to the targets (docs/guide/notifications.md): on a
        # worker that serves the queue of the jobs that send it, one pass at a time.
        notify = notify_settings()
        if serves is not None and serves(notify.notify_queue):
            self._duties.append(("notify", base or notify.notify_interval,
                                 lambda conn: notifier.run_once(conn, registry, notify)))
        policy = settings.retention
        if policy is not None:
            self._duties.append(("retention", base or 60.0,
                                 lambda conn: retention.run_once(conn, policy)))
        # Spread the first runs so workers started together do not all try at once.
        now = time.monotonic()
        self._next = {name: now + random.uniform(0, min(every, 5.0))
                      for name, every, _ in self._duties}

    def run(self, pool: ConnectionPool, closing: threading.Event, tick: float = 0.5) -> None:
        """The duty thread: run each duty when its time comes, until `closing` is set."""
        while not closing.is_set():
            self.run_now(pool)
            closing.wait(tick)

    def _schedules(self, conn: psycopg.Connection) -> None:
        if not self._published:  # after the worker published its job types
            with conn.transaction():
                scheduler.publish(conn, self.registry, self.worker_id)
            self._published = True
        scheduler.run_once(conn, self.registry)

    def run_now(self, pool: ConnectionPool) -> None:
        """Run every duty whose time has come; a failing duty is logged and retried later."""
        for name, every, duty in self._duties:
            if time.monotonic() < self._next[name]:
                continue
            self._next[name] = time.monotonic() + every
            try:
                with pool.connection() as conn:
                    duty(conn)
            except psycopg.Error as exc:
                log.warning("%s pass failed: %s", name, exc,
                            extra={"action": "duty_failed", "duty": name})
            except Exception:
                log.exception("%s pass failed", name,
                              extra={"action": "duty_failed", "duty": name})
