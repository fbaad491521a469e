"""The worker's log lines pass through the same redaction as the screen: a secret a
handler (or a library under it) logs never reaches the log stream."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from jobwarden import enqueue
from tests.helpers import job_row, start_process, stop_process, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECRETS = ("hunter2secret", "q1w2e3r4t5", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "swordfish42",
           "4242424242424242")


def test_secrets_logged_by_a_handler_are_redacted_in_the_worker_log(conn, clean_db):
    job_id = enqueue(conn, "leaky_log", {})
    conn.commit()
    worker = start_process(
        [sys.executable, "-m", "jobwarden.worker.cli", "worker", "--app", "tests.apps.secret_log_app",
         "--concurrency", "1", "--poll-interval", "0.1", "--grace", "5"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: job_row(clean_db, job_id)["status"] == "failed",
                 message="the job to fail")
    finally:
        output, _ = stop_process(worker, signal.SIGTERM)
    assert "upstream failed" in output and "Traceback" in output  # the lines are there…
    assert "[REDACTED]" in output
    leaked = [s for s in SECRETS if s in output]
    assert not leaked, output  # …without the secrets
