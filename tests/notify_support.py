"""Helpers of the notifications' tests: failures and retries written through the
runtime's own statements (claim, then the completer's write), settings with a target,
and real receivers: an HTTP server on a thread that checks the signature, and an SMTP
server (aiosmtpd) that keeps what it is sent."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from jobwarden import JobSpec, Registry, RetryPolicy, enqueue_many, job
from jobwarden.worker.core.settings import NotifySettings
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import claim

WORKER = "notify-test:1:abcdef"
LEASE = 30.0
LATER = RetryPolicy(base=3600, cap=3600, jitter=0)
SECRET = "whsec-test-0123456789"


def registry(*names: str) -> Registry:
    reg = Registry()
    for name in names:
        job(name, lease=LEASE, max_attempts=3, backoff=LATER, registry=reg)(
            lambda ctx, payload: None)
    return reg


def finish(conn, job_type: str, n: int, *, code: str, status: S = S.FAILED,
           error: str = "it broke", chunk: int = 1000) -> list[int]:
    """Enqueue `n` jobs of `job_type`, claim them and write them `status` (failed for
    good, pending again: a retry, or completed) with `code`, in chunks, as workers
    would."""
    reg = registry(job_type)
    outcome = {S.FAILED: O.FAILED, S.PENDING: O.RETRY, S.COMPLETED: O.COMPLETED}[status]
    ids: list[int] = []
    left = n
    while left:
        take = min(chunk, left)
        enqueue_many(conn, [JobSpec(job_type, {}) for _ in range(take)], registry=reg)
        conn.commit()
        jobs = claim(conn, types=[job_type], leases=[LEASE], queues=None, limit=take,
                     worker_id=WORKER)
        conn.commit()
        written = write_batch(conn, [
            Completion(job_id=j.id, execution_id=j.execution_id, type=j.type,
                       attempt=j.attempt, lease=LEASE, status=status, outcome=outcome,
                       error_code=code or None,
                       error=None if status is S.COMPLETED else error, delay=3600.0,
                       queue=j.queue)
            for j in jobs])
        conn.commit()
        assert len(written) == len(jobs) == take
        ids += [j.id for j in jobs]
        left -= take
    return ids


def settings(**values: Any) -> NotifySettings:
    """Notification settings with an environment webhook (never called: these tests run
    the notifier, not the sending), and `values` over them."""
    base: dict[str, Any] = {"notify_webhook_url": "https://hooks.example.com/jobwarden/x1"}
    return NotifySettings.model_validate({**base, **values})


def messages(conn) -> list[dict[str, Any]]:
    """Every message recorded, oldest first."""
    rows = conn.execute("SELECT id, kind, summary, message FROM job_notifications "
                        "ORDER BY id").fetchall()
    conn.commit()
    return [{"id": i, "kind": k, "summary": s, **m} for i, k, s, m in rows]


def age_groups(conn, seconds: float, rollup: bool = False) -> None:
    """Move every group's last message (and sighting) `seconds` into the past: the
    period passes without waiting for it. `rollup`: the rollup's minutes too (what
    happened, happened that long ago)."""
    conn.execute("UPDATE job_notify_groups SET last_sent_at = last_sent_at - "
                 "make_interval(secs => %(s)s), last_seen_at = last_seen_at - "
                 "make_interval(secs => %(s)s)", {"s": seconds})
    if rollup:  # then the groups' starts are as old as the minutes they were read from
        conn.execute("UPDATE job_notify_groups SET started_at = started_at - "
                     "make_interval(secs => %(s)s), counted_from = counted_from - "
                     "make_interval(secs => %(s)s)", {"s": seconds})
        conn.execute("UPDATE job_minute_counts SET minute = minute - make_interval(secs => %s)",
                     [seconds])
    conn.commit()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check, what: str, seconds: float = 30.0):
    """Poll `check` until it returns something true, or fail naming `what`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def verified(secret: str, headers: Any, body: bytes) -> bool:
    """A receiver's own check, as the guide prints it (not the worker's code): the HMAC
    of the timestamp, a dot and the body, within 5 minutes of now."""
    timestamp = headers.get("X-Jobwarden-Timestamp", "")
    sent = headers.get("X-Jobwarden-Signature", "")
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > 300:
        return False
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return any(hmac.compare_digest("v1=" + mac.hexdigest(), part.strip())
               for part in sent.split(","))


@dataclass
class Received:
    """What a receiver got: each request's headers and body, and whether its signature
    verified."""

    posts: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, item: dict[str, Any]) -> None:
        with self.lock:
            self.posts.append(item)

    def all(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.posts)


@contextmanager
def webhook_receiver(port: int | None = None, secret: str = SECRET,
                     status: int = 200) -> Iterator[tuple[str, Received]]:
    """A real HTTP server on a thread at 127.0.0.1: each POST is kept with whether its
    signature verifies with `secret` (`verified`, as docs/guide/notifications.md says
    to check it).
    Yields its URL and what it received."""
    received = Received()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.add({
                "path": self.path, "headers": dict(self.headers), "body": body,
                "json": json.loads(body),
                "verified": verified(secret, self.headers, body)})
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/t0ken-path", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def smtp_server(tls_context=None, require_starttls: bool = False,
                port: int | None = None) -> Iterator[tuple[int, list[Any]]]:
    """A real SMTP server (aiosmtpd) on 127.0.0.1: yields its port and the envelopes it
    accepted (each with mail_from, rcpt_tos and content)."""
    from aiosmtpd.controller import Controller

    got: list[Any] = []

    class Keep:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's)
            got.append(envelope)
            return "250 OK"

    controller = Controller(Keep(), hostname="127.0.0.1", port=port or free_port(),
                            tls_context=tls_context, require_starttls=require_starttls)
    controller.start()
    try:
        yield controller.port, got
    finally:
        controller.stop()
