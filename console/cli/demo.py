"""`jobwarden demo`: embedded PostgreSQL, migrations, demo jobs, a worker and the console."""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from werkzeug.serving import BaseWSGIServer

from jobwarden.console.cli.accounts import user_add
from jobwarden.console.cli.server import make_server
from jobwarden.console.data.database import CQ, ConsoleDatabase, connected
from jobwarden.worker.jobs.enqueue import enqueue_many
from jobwarden.worker.jobs.job_spec import JobSpec
from jobwarden.worker.ops.operations import cancel_job, retry_job
from jobwarden.worker.store.db import database_url, migrate

log = logging.getLogger("jobwarden.demo")

DEMO_USER = "demo"
DEMO_PASSWORD = "jobwarden-demo"  # printed on start; the demo listens on localhost only


def demo_batch() -> list[JobSpec]:
    """A mix that ends in every state: completed, retried, failed, skipped, unknown."""
    jobs = [JobSpec("send_email", {"userId": 50 + i, "template": "welcome",
                                   "flaky": i % 3 == 0}, idempotency_key=None)
            for i in range(6)]
    jobs += [JobSpec("generate_pdf", {"reportId": 1840 + i, "pages": 12}) for i in range(2)]
    jobs += [JobSpec("sync_crm", {"contactId": 7, "api_token": "crm-live-1234567890"}),
             JobSpec("sync_crm", {"contactId": 8, "api_token": "crm-live-0987654321"}),
             JobSpec("provider_call", {"orderId": 1842}),
             JobSpec("charge_card", {"orderId": 1842, "amount": 4900}),
             JobSpec("call_webhook", {"url": "https://hooks.example.com/orders"}),
             JobSpec("project_report", {"projectId": 1842}),
             JobSpec("export_data", {"rows": []}),
             JobSpec("send_reminder", {"userId": 52}, version=1),
             JobSpec("send_reminder", {"user_id": 53, "channel": "sms"}),
             JobSpec("send_email", {"userId": 99, "comment": "<script>alert(1)</script>"}),
             JobSpec("send_email", {"userId": 100, "template": "digest"}, delay=3600)]
    return jobs


def _operator_actions(batch: list[JobSpec], ids: list[int],
                      settle: Callable[[], None]) -> None:
    """What an operator would do, so the audit log and the cancelled state have content."""
    types = [spec.type for spec in batch]
    digest, provider_call = ids[-1], ids[types.index("provider_call")]
    with connected() as db, db.transaction() as tx:
        result = cancel_job(tx.conn, digest, actor=DEMO_USER, role="admin",
                            reason="demo: the customer unsubscribed from digests")
        print(result.message)
    settle()
    with connected() as db, db.transaction() as tx:
        result = retry_job(tx.conn, provider_call, actor=DEMO_USER, role="admin",
                           reason="demo: the provider says it has recovered")
        print(result.message)
    settle()


def _ensure_demo_user() -> None:
    with connected() as db:
        exists = db.one(CQ.demo_user_exists, username=DEMO_USER)
    if not exists:
        user_add(DEMO_USER, "admin", DEMO_PASSWORD)


def _serve_in_thread(server: BaseWSGIServer) -> None:
    threading.Thread(target=server.serve_forever, name="console", daemon=True).start()


def _print_summary(ids: list[int]) -> None:
    with connected() as db:
        rows = [tuple(row.values()) for row in db.all(CQ.demo_batch_summary, ids=ids)]
    print(f"\n{'id':>5}  {'type':<15} {'queue':<13} {'status':<10} {'tries':<6} error")
    for id_, type_, queue, status, attempts, max_attempts, code, error in rows:
        detail = f"{code}: {error[:70]}" if code and error else (code or "")
        if status == "completed" and detail:
            detail = f"(after {detail})"
        print(f"{id_:>5}  {type_:<15} {queue:<13} {status:<10} {attempts}/{max_attempts:<4} "
              f"{detail}")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[3]] = counts.get(row[3], 0) + 1
    print("\nby status: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))


def run_demo(port: int = 8000, exit_when_done: bool = False, settle_timeout: float = 90,
             use_database_url: bool = False) -> int:
    # Imported here, not above: importing demo_jobs registers the demo's job types in the
    # process-wide registry, which only the demo itself should see (not `jobwarden user`).
    from jobwarden.worker import demo_jobs  # noqa: F401
    from jobwarden.worker.jobs.registry import registry  # (the registry demo_jobs filled)

    # The worker's machinery and the registry holding those types, needed only here.
    from jobwarden.worker.process import WorkerProcess

    if os.environ.get("DATABASE_URL") and not use_database_url:
        # The demo plants an admin login whose password is printed and in the README: on
        # a real database that is a known password, so it must be asked for by name.
        print("jobwarden demo: DATABASE_URL is set, and the demo would add demo jobs and the "
              f"admin login {DEMO_USER} / {DEMO_PASSWORD} to that database; unset it to use "
              "the embedded PostgreSQL, or pass --yes-use-this-database", file=sys.stderr)
        return 2
    try:  # before anything is written: a busy port must change nothing
        # No schema check: the demo migrates the database itself, once the port is bound.
        server = make_server("127.0.0.1", port, config={"CHECK_SCHEMA": False},
                             access_log=False)
    except OSError as exc:
        print(f"jobwarden demo: cannot serve the console on 127.0.0.1:{port} ({exc.strerror}); "
              f"choose another port with --port (make demo PORT={port + 1})", file=sys.stderr)
        return 2
    url = database_url()
    print(f"database: {url}")
    migrate(url)
    print("migrations applied")
    _ensure_demo_user()
    _serve_in_thread(server)  # bound above; it answers once the schema is there
    print(f"console: http://127.0.0.1:{server.server_port}/  "
          f"(login {DEMO_USER} / {DEMO_PASSWORD})", flush=True)
    batch = demo_batch()
    db = ConsoleDatabase(url, pool_size=1)
    with db.transaction() as tx:
        ids = enqueue_many(tx.conn, batch)
    print(f"enqueued {len(ids)} demo jobs (ids {min(ids)}-{max(ids)})")

    worker = WorkerProcess(registry, url=url, concurrency=4, poll_interval=0.5, grace=5)
    worker_thread = threading.Thread(target=worker.run, name="demo-worker", daemon=True)
    worker_thread.start()
    print(f"worker {worker.worker_id} running {len(registry.names())} job types\n")

    stop = _StopRequest()

    def settle() -> None:
        deadline = time.monotonic() + settle_timeout
        while time.monotonic() < deadline:
            if db.row(CQ.demo_batch_unsettled, ids=ids)["count"] == 0:
                return
            stop.sleep(0.5)

    # SIGTERM (a process manager, `kill`) stops the demo exactly as Ctrl-C does.
    previous = {sig: signal.signal(sig, stop.request) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        _operator_actions(batch, ids, settle)
        stop.check()
        _print_summary(ids)
        if not exit_when_done:
            print("\nThe worker keeps running and new jobs trickle in; open the console above. "
                  "Ctrl-C stops. The embedded PostgreSQL keeps running afterwards: "
                  "`jobwarden embedded stop` stops it.", flush=True)
            while True:
                stop.sleep(10)
                with db.transaction() as tx:
                    enqueue_many(tx.conn, random.sample(demo_batch(), 2))
    except KeyboardInterrupt:
        print("\nstopping…", flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        worker.request_stop()
        worker_thread.join(timeout=15)
        server.shutdown()
        server.server_close()
        db.dispose()
    return 0


class _StopRequest:
    """Ctrl-C or SIGTERM, acted on only where the demo waits.

    Raising KeyboardInterrupt from the signal handler itself would land wherever the main
    thread happened to be, for instance inside the connection pool returning a connection,
    which then logs the interrupt with a traceback before passing it on. The handler only
    notes the request; `sleep` and `check` raise it at points where nothing is half done.
    """

    def __init__(self) -> None:
        self.requested = False

    def request(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            self.check()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.1))
