"""`--log-format json`: one JSON object per line, a stable `action` per lifecycle event."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psycopg
import psycopg.sql

from jobwarden import JobSpec, enqueue_many
from jobwarden.worker.core.sanitize import MAX_ERROR_CODE_CHARS
from tests.apps.lifecycle_app import PAUSE
from tests.apps.secret_log_app import FIELD_SECRETS, SECRET_CODES
from tests.helpers import job_row, start_process, stop_process, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def run_json_worker(url: str, app: str, log, until) -> subprocess.Popen:
    """Run `jobwarden worker --app app` logging JSON lines at DEBUG into `log` until
    `until()` holds, then stop it with SIGTERM (claims and completions log at DEBUG: at
    thousands a second INFO would drown the rest)."""
    env = {**os.environ, "DATABASE_URL": url, "JOBWARDEN_LOG_FORMAT": "json"}
    proc = start_process([sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "DEBUG",
                          "worker", "--app", app, "--poll-interval", "0.2"],
                         cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        wait_for(until, timeout=60)
    finally:
        stop_process(proc, signal.SIGTERM)
    return proc


def test_a_worker_logs_each_lifecycle_event_as_one_json_object(conn, clean_db, tmp_path):
    conn.execute("DROP TABLE IF EXISTS race_log")
    conn.execute("CREATE TABLE race_log (job_id bigint, execution_id uuid, pid int)")
    [job_id] = enqueue_many(conn, [JobSpec("race", {"n": 1})])
    conn.commit()
    log = tmp_path / "worker.log"
    proc = run_json_worker(clean_db, "tests.apps.race_app", log,
                           lambda: job_row(clean_db, job_id)["status"] == "completed")
    assert proc.returncode == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]  # every line parses
    by_action = {r.get("action"): r for r in records}
    assert {"worker_started", "job_claimed", "job_completed", "worker_stopped"} <= set(by_action)
    claimed, completed = by_action["job_claimed"], by_action["job_completed"]
    assert (claimed["job_id"], claimed["job_type"], claimed["attempt"]) == (job_id, "race", 1)
    assert completed["execution_id"] == claimed["execution_id"]
    assert {"time", "level", "logger", "message"} <= set(completed)


#: The fields every line about one execution carries (docs/operations.md §4).
EXECUTION_FIELDS = {"job_id", "job_type", "queue", "execution_id", "attempt", "error_code",
                    "duration_ms"}


def test_each_outcome_line_carries_the_execution_its_queue_and_its_duration(clean_db, tmp_path):
    with psycopg.connect(clean_db) as conn:
        ids = dict(zip(["lc.ok", "lc.flaky", "lc.declined", "lc.gone", "lc.slow"], enqueue_many(
            conn, [JobSpec(t, {}, queue="lifecycle") for t in
                   ["lc.ok", "lc.flaky", "lc.declined", "lc.gone", "lc.slow"]]), strict=True))
    log = tmp_path / "worker.log"
    proc = run_json_worker(clean_db, "tests.apps.lifecycle_app", log, lambda: all(
        job_row(clean_db, i)["status"] in ("completed", "failed", "skipped")
        for i in ids.values()))
    assert proc.returncode == 0
    written = [r for r in map(json.loads, log.read_text().splitlines())
               if r["logger"] == "jobwarden.completer"]
    by_job = {(r["job_id"], r["action"]): r for r in written}
    expected = [(ids["lc.ok"], "job_completed", None), (ids["lc.flaky"], "job_retry", "UPSTREAM_502"),
                (ids["lc.flaky"], "job_completed", None),
                (ids["lc.declined"], "job_failed", "DECLINED"),
                (ids["lc.gone"], "job_skipped", "SKIPPED"), (ids["lc.slow"], "job_timeout", "TIMEOUT")]
    assert {(job_id, action) for job_id, action, _code in expected} <= set(by_job), written
    for job_id, action, code in expected:
        line = by_job[job_id, action]
        assert EXECUTION_FIELDS <= set(line), line
        assert (line["queue"], line["error_code"]) == ("lifecycle", code), line
        assert line["job_type"] in ids and ids[line["job_type"]] == job_id
        # milliseconds: each handler ran for at least PAUSE seconds (lc.slow: its timeout)
        assert line["duration_ms"] >= PAUSE * 1000, line
    retry, second = by_job[ids["lc.flaky"], "job_retry"], by_job[ids["lc.flaky"], "job_completed"]
    assert (retry["attempt"], second["attempt"]) == (1, 2)
    assert retry["execution_id"] != second["execution_id"]


def test_an_unknown_log_format_is_refused_by_name(clean_db):
    env = {**os.environ, "DATABASE_URL": clean_db, "JOBWARDEN_LOG_FORMAT": "xml"}
    result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "stats"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == ("jobwarden: JOBWARDEN_LOG_FORMAT: input should be 'text' or "
                             "'json' (got 'xml')\n")


def database_text(url: str) -> str:
    """Every row of every table of the database, as text: where a secret could be kept."""
    with psycopg.connect(url) as conn:
        tables = [t for (t,) in conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")]
        return "\n".join(str(row[0]) for t in tables for row in conn.execute(
            psycopg.sql.SQL("SELECT t::text FROM {} t").format(psycopg.sql.Identifier(t))))


def test_secrets_in_error_codes_and_log_fields_reach_neither_the_json_log_nor_a_column(
        clean_db, tmp_path):
    shapes = list(SECRET_CODES)
    with psycopg.connect(clean_db) as conn:
        ids = enqueue_many(conn, [JobSpec("leaky_code", {"shape": s}) for s in shapes]
                           + [JobSpec("long_code", {"n": n}) for n in (1, 2)])
    log = tmp_path / "worker.log"
    run_json_worker(clean_db, "tests.apps.secret_log_app", log,
                    lambda: all(job_row(clean_db, i)["status"] == "failed" for i in ids))
    text = log.read_text()
    records = [json.loads(line) for line in text.splitlines()]
    assert {"provider_declined", "job_retry", "job_failed"} <= {r.get("action") for r in records}
    secrets = ["sk_live_4eC39HqLyjWDarjtT1zdp7dc", "swordfish42", "AKIAIOSFODNN7EXAMPLE",
               *FIELD_SECRETS]
    stored = database_text(clean_db)
    for where, body in (("the JSON log", text), ("the database", stored)):
        leaked = [s for s in secrets if s in body]
        assert not leaked, f"{where} holds {leaked}"
    # Codes are capped, and stay groupable: one code per job, a stable one per long code.
    with psycopg.connect(clean_db) as conn:
        codes = dict(conn.execute("SELECT id, last_error_code FROM background_jobs"))
        executed = conn.execute("SELECT job_id, error_code FROM job_executions").fetchall()
    assert all(len(code) <= MAX_ERROR_CODE_CHARS for code in codes.values()), codes
    assert all(codes[job_id] == code for job_id, code in executed if code), executed
    long_1, long_2 = (codes[i] for i in ids[-2:])
    assert long_1.startswith("E_1_UPSTREAM_SAID_") and long_2.startswith("E_2_UPSTREAM_SAID_")
    assert codes[ids[0]] == "DECLINED_[REDACTED]"
