"""`--log-format json`: one JSON object per line, a stable `action` per lifecycle event."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.helpers import job_row, wait_for
from worker import JobSpec, enqueue_many

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_a_worker_logs_each_lifecycle_event_as_one_json_object(conn, clean_db, tmp_path):
    conn.execute("DROP TABLE IF EXISTS race_log")
    conn.execute("CREATE TABLE race_log (job_id bigint, execution_id uuid, pid int)")
    [job_id] = enqueue_many(conn, [JobSpec("race", {"n": 1})])
    conn.commit()
    log = tmp_path / "worker.log"
    env = {**os.environ, "DATABASE_URL": clean_db, "JOBWARDEN_LOG_FORMAT": "json"}
    # claims and completions log at DEBUG: at thousands a second INFO would drown the rest
    proc = subprocess.Popen([sys.executable, "-m", "worker.cli", "--log-level", "DEBUG",
                             "worker", "--app",
                             "tests.apps.race_app", "--poll-interval", "0.2"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        wait_for(lambda: job_row(clean_db, job_id)["status"] == "completed", timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]  # every line parses
    by_action = {r.get("action"): r for r in records}
    assert {"worker_started", "job_claimed", "job_completed", "worker_stopped"} <= set(by_action)
    claimed, completed = by_action["job_claimed"], by_action["job_completed"]
    assert (claimed["job_id"], claimed["job_type"], claimed["attempt"]) == (job_id, "race", 1)
    assert completed["execution_id"] == claimed["execution_id"]
    assert {"time", "level", "logger", "message"} <= set(completed)


def test_an_unknown_log_format_is_refused_by_name(clean_db):
    env = {**os.environ, "DATABASE_URL": clean_db, "JOBWARDEN_LOG_FORMAT": "xml"}
    result = subprocess.run([sys.executable, "-m", "worker.cli", "stats"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unknown log format 'xml'" in result.stderr
