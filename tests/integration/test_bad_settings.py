"""A JOBWARDEN_* variable that does not read stops the worker and the console before they
start: exit status 2, one line naming the variable and what is wrong, nothing written
(as a bad DATABASE_URL does: test_database_url.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

COMMANDS = {
    "worker": ["worker", "--app", "jobwarden.worker.demo_jobs"],
    "console": ["console", "--port", "0"],
}
#: (command, variable, value, the one line it prints)
CASES = [
    ("worker", "JOBWARDEN_DUTY_INTERVAL", "abc",
     "JOBWARDEN_DUTY_INTERVAL: 'abc' is not a duration: use e.g. 30, 30s, 5m, 2h or 7d"),
    ("worker", "JOBWARDEN_POOLER", "session",
     "JOBWARDEN_POOLER: input should be 'transaction' (got 'session')"),
    # read by enqueue alone, which a worker may never call: refused at start all the same
    ("worker", "JOBWARDEN_MAX_PAYLOAD_BYTES", "64k",
     "JOBWARDEN_MAX_PAYLOAD_BYTES: input should be a valid integer, unable to parse string "
     "as an integer (got '64k')"),
    # the notifier's, read by a worker and the console
    ("worker", "JOBWARDEN_NOTIFY_SMTP_PORT", "70000",
     "JOBWARDEN_NOTIFY_SMTP_PORT: input should be less than or equal to 65535 (got '70000')"),
    ("console", "JOBWARDEN_NOTIFY_WEBHOOK_URL", "file:///etc/passwd",
     "JOBWARDEN_NOTIFY_WEBHOOK_URL: a webhook URL starts with https:// or http://"),
    ("console", "JOBWARDEN_STALE_AFTER", "abc",
     "JOBWARDEN_STALE_AFTER: 'abc' is not a duration: use e.g. 30, 30s, 5m, 2h or 7d"),
    ("console", "JOBWARDEN_SLA", "send_email",
     "JOBWARDEN_SLA: 'send_email' is not a job type's target like send_email=30s"),
]


def workers(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM job_workers").fetchone()[0]


@pytest.mark.parametrize(("command", "variable", "value", "line"), CASES,
                         ids=[f"{c}-{v}" for c, v, _, _ in CASES])
def test_a_bad_setting_stops_the_command_in_one_line(clean_db, tmp_path, command, variable,
                                                     value, line):
    env = dict(os.environ, DATABASE_URL=clean_db, JOBWARDEN_HOME=str(tmp_path),
               **{variable: value})
    try:
        result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli",
                                 *COMMANDS[command]], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as exc:  # a worker working, a console serving
        pytest.fail(f"{command} ran on with {variable}={value!r}: {exc.stderr!r}")
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"jobwarden: {line}\n"
    assert "Jobwarden console on" not in result.stdout
    assert workers(clean_db) == 0  # no worker registered itself
    assert list(tmp_path.iterdir()) == []  # no embedded server, no generated secret key
