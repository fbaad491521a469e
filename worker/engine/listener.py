"""LISTEN/NOTIFY wake-ups for an idle worker, with reconnection.

Enqueues (and operator retries) send `pg_notify('jobwarden_jobs', queue)`, delivered
when their transaction commits. A notification only says "look now"; polling stays
the fallback that always works, so a lost notification delays a job, never loses it.

Where the database allows it, each lane's producer LISTENs on its own claim connection
and waits on that connection's socket and its `Wakeup` together, so a notified job is
claimed by the thread the notification woke, on the connection that received it
(worker/engine/producer.py; docs/architecture.md §6, "Waking a producer"). This module
holds that wait (`Wakeup`, `read_notifies`) and the separate listener thread
(`listen_for_jobs`), which stays for the one case where the producers cannot LISTEN:
behind a transaction-pooling PgBouncer their claims go through the pooler, so LISTEN
connects to JOBWARDEN_LISTEN_URL (direct to PostgreSQL) on a thread of its own, or does
not happen at all and the worker polls (worker/store/db.py `listen_url`).
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Callable

import psycopg

from jobwarden.worker.core.dberrors import DB_UNREACHABLE, Backoff
from jobwarden.worker.store.db import listen_url, pooled
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.listener")

NOTIFY_CHANNEL = "jobwarden_jobs"
#: The application_name of every session that LISTENs for jobs (pg_stat_activity shows
#: a claim connection's last claim as its query, not its LISTEN).
LISTEN_APPLICATION_NAME = "jobwarden-listen"


class Wakeup:
    """A threading.Event (`set`, `clear`, `is_set`, `wait`) that a thread can also wait
    for together with a socket (`wait(timeout, fd)`): a pipe, made on the first such
    wait, holds a byte while the wake-up is set. Any thread may set it; one waits."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._pipe: tuple[int, int] | None = None

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        if self._event.is_set():
            return  # already set (and its byte, if there is a pipe, already written)
        with self._lock:
            if not self._event.is_set():
                self._event.set()
                if self._pipe is not None:
                    _poke(self._pipe[1])

    def clear(self) -> None:
        with self._lock:
            if self._event.is_set():
                self._event.clear()
                if self._pipe is not None:
                    _drain(self._pipe[0])

    def wait(self, timeout: float, fd: int | None = None) -> bool:
        """Return once set or after `timeout` seconds; with `fd`, also once it is
        readable, and then True (the caller reads it)."""
        if fd is None:
            self._event.wait(timeout)
            return False
        with self._lock:
            if self._pipe is None:
                r, w = os.pipe()
                os.set_blocking(r, False)
                os.set_blocking(w, False)
                self._pipe = (r, w)
                if self._event.is_set():
                    _poke(w)
            r = self._pipe[0]
        if self._event.is_set():
            return False
        # poll(), not select(): a worker with many connections has descriptors past
        # select()'s FD_SETSIZE (1024).
        poller = select.poll()
        poller.register(r, select.POLLIN)
        poller.register(fd, select.POLLIN)
        ready = poller.poll(max(0.0, timeout) * 1000)
        return any(ready_fd == fd for ready_fd, _ in ready)

    def close(self) -> None:
        """Give the pipe back (the waiting thread is done; `set` still works)."""
        with self._lock:
            if self._pipe is not None:
                for fd in self._pipe:
                    os.close(fd)
                self._pipe = None


def _poke(fd: int) -> None:
    try:
        os.write(fd, b"\0")
    except BlockingIOError:
        pass  # the pipe is full of pokes: readable all the same


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def listen_on(conn: psycopg.Connection, noted: Callable[[str], None]) -> str:
    """Subscribe `conn`'s session to NOTIFY_CHANNEL; `noted(queue)` for each notification
    it receives, whether during a statement or by read_notifies. Returns the codec its
    payloads come in, for read_notifies."""
    conn.add_notify_handler(lambda note: noted(note.payload))
    JobStore(conn).rows(Q.listen_for_jobs)  # the channel NOTIFY_CHANNEL names
    return conn.info.encoding


def read_notifies(conn: psycopg.Connection, noted: Callable[[str], None], *,
                  consume: bool = True, encoding: str | None = None) -> None:
    """`noted(queue)` for each notification that has reached `conn`'s socket (readable:
    this does not block), or with `consume` False, for those libpq has read already
    (the tail of a statement's last read). `encoding`: the codec listen_on returned
    (None: asked of the connection, 0.02 ms on a woken worker's path to its claim).
    OperationalError when the connection is gone."""
    pgconn = conn.pgconn
    if consume:
        pgconn.consume_input()  # OperationalError on a closed connection
    enc = conn.info.encoding if encoding is None else encoding
    while (note := pgconn.notifies()) is not None:
        noted(note.extra.decode(enc))
    if conn.closed:  # its backend said goodbye (pg_terminate_backend, a shutdown)
        raise psycopg.OperationalError("the LISTEN connection was closed by the server")


def listen_for_jobs(url: str, wake: Callable[[str | None], None],
                    closing: threading.Event) -> None:
    """The listener thread: call `wake(queue)` on every notification until `closing` is
    set (`wake(None)`: any queue may have jobs); reconnect with backoff. Only where the
    producers cannot LISTEN on their claim connections (`producers_listen`)."""
    direct = listen_url(url)
    if direct is None:
        log.info("no LISTEN through a transaction pooler without JOBWARDEN_LISTEN_URL: "
                 "waking by polling only", extra={"action": "listen_disabled"})
        return
    url = direct
    backoff = Backoff()
    while not closing.is_set():
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5,
                                 application_name=LISTEN_APPLICATION_NAME) as conn:
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


def producers_listen(url: str) -> bool:
    """Whether the producers LISTEN on their claim connections: when LISTEN may connect
    where the claims do (no transaction pooler, or JOBWARDEN_LISTEN_URL naming that same
    server URL), never through a transaction pooler. Otherwise the listener thread
    listens, or nothing does."""
    return not pooled() and listen_url(url) == url
