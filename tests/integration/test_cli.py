"""The `jobwarden` command line, run as a real subprocess against the test database."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.helpers import job_row, scalar, start_process, stop_process, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def jobwarden(*args: str, input: str | None = None, timeout: float = 120):
    return subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", *args],
                          cwd=ROOT, capture_output=True, text=True, input=input,
                          timeout=timeout)


def test_migrate_is_idempotent(clean_db):
    result = jobwarden("migrate")
    assert result.returncode == 0, result.stderr
    assert "migrated" in result.stdout


def test_enqueue_prints_the_id_and_stats_count_it(clean_db):
    result = jobwarden("enqueue", "send_email", "--payload", '{"userId": 52}', "--queue",
                       "email", "--delay", "5m")
    assert result.returncode == 0, result.stderr
    row = job_row(clean_db, int(result.stdout))
    assert (row["type"], row["queue"], row["payload"]) == ("send_email", "email", {"userId": 52})
    assert 290 < row["available_in"] <= 300
    stats = json.loads(jobwarden("stats", "--json").stdout)
    assert stats["by_status"] == {"pending": 1}
    assert stats["by_status_queue_type"] == [
        {"status": "pending", "queue": "email", "type": "send_email", "count": 1}]


def test_enqueue_rejects_bad_input_with_a_clear_message(clean_db):
    for args, message in [
        (["t", "--payload", "{not json"], "not valid JSON"),
        (["t", "--payload", "[1, 2]"], "JSON object"),
        (["bad type!", "--payload", "{}"], "invalid job type"),
    ]:
        result = jobwarden("enqueue", *args)
        assert result.returncode == 2
        assert message in result.stderr
        assert "Traceback" not in result.stderr
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


def test_worker_refuses_an_app_that_does_not_import(clean_db):
    result = jobwarden("worker", "--app", "no_such_module_here")
    assert result.returncode != 0
    assert "cannot import app module 'no_such_module_here'" in result.stderr


@pytest.mark.parametrize("app", ["./jobs", "", "a..b", "jobs/tasks"])
def test_worker_refuses_an_app_that_is_no_module_name_in_one_line(clean_db, app):
    result = jobwarden("worker", "--app", app)
    assert result.returncode == 1
    assert result.stderr == (f"jobwarden: {app!r} is not a module name: give the app's "
                             "dotted name, such as shop or myapp.jobs\n")


def test_unreachable_database_is_a_one_line_error(clean_db):
    env = dict(os.environ, DATABASE_URL="postgresql://postgres@127.0.0.1:1/nowhere")
    result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "stats"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "cannot reach the database" in result.stderr and "Traceback" not in result.stderr


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_migrate_with_the_database_down_is_one_error_line_like_the_other_commands():
    env = dict(os.environ, DATABASE_URL=f"postgresql://postgres@127.0.0.1:{closed_port()}/x")
    for command in ("migrate", "stats"):
        result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", command], cwd=ROOT,
                                env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, (command, result.stderr)
        assert result.stderr.count("\n") == 1, (command, result.stderr)
        assert result.stderr.startswith("jobwarden: cannot reach the database:"), result.stderr


def test_an_unmigrated_database_says_to_migrate(empty_database):
    env = dict(os.environ, DATABASE_URL=empty_database)
    for args, stdin in ((["stats"], None), (["user", "add", "ann", "--role", "viewer"], "pw12345678\n")):
        result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", *args], cwd=ROOT, env=env,
                                capture_output=True, text=True, input=stdin, timeout=60)
        assert result.returncode == 1, result.stderr
        assert "run `jobwarden migrate` first" in result.stderr
        assert "Traceback" not in result.stderr


def test_demo_runs_every_outcome_and_exits(clean_db):
    # Port 0: a free port, so a concurrent run of this test cannot collide with it.
    result = jobwarden("demo", "--exit-when-done", "--port", "0", "--yes-use-this-database",
                       timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "by status: cancelled=1, completed=12, failed=4, skipped=1, unknown=1" in out
    assert "back in pending" in out  # the operator retry, audited
    assert scalar(clean_db, "SELECT array_agg(action ORDER BY id) FROM job_audit") == [
        "cancel", "retry"]
    assert "[REDACTED]" in out and "tok3n-s3cret" not in out
    assert "console: http://127.0.0.1:" in out


def test_prune_deletes_old_finished_jobs_and_keeps_failed_ones(conn, clean_db):
    conn.execute("""
        INSERT INTO background_jobs (type, payload, status, completed_at, failed_at) VALUES
          ('t', '{}', 'completed', now() - interval '8 days', NULL),
          ('t', '{}', 'completed', now() - interval '1 hour', NULL),
          ('t', '{}', 'failed', NULL, now() - interval '30 days'),
          ('t', '{}', 'pending', NULL, NULL)""")
    conn.commit()
    result = jobwarden("prune", "--older-than", "7d", "--yes")
    assert result.returncode == 0, result.stderr
    assert "pruned 1 job(s)" in result.stdout
    assert scalar(clean_db, "SELECT array_agg(status ORDER BY id) FROM background_jobs") == [
        "completed", "failed", "pending"]
    assert "pruned 1 job(s)" in jobwarden("prune", "--older-than", "7d",
                                          "--include-failed", "--yes").stdout


def old_finished_jobs(conn) -> None:
    conn.execute("""
        INSERT INTO background_jobs (type, payload, status, completed_at, skipped_at) VALUES
          ('t', '{}', 'completed', now() - interval '8 days', NULL),
          ('t', '{}', 'completed', now() - interval '9 days', NULL),
          ('t', '{}', 'skipped', NULL, now() - interval '8 days')""")
    conn.commit()


@pytest.mark.parametrize("bare", ["3", "3.5", "7"])
def test_prune_refuses_an_age_without_a_unit(conn, clean_db, bare):
    old_finished_jobs(conn)
    result = jobwarden("prune", "--older-than", bare, "--yes")
    assert result.returncode == 2
    assert f"argument --older-than: '{bare}' needs a unit" in result.stderr
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 3


def test_prune_without_a_terminal_says_what_it_would_delete_and_wants_yes(conn, clean_db):
    old_finished_jobs(conn)
    refused = jobwarden("prune", "--older-than", "7d", input="y\n")  # stdin: not a terminal
    assert refused.returncode == 2
    assert "completed=2, skipped=1, cancelled=0" in refused.stdout
    assert "--yes" in refused.stderr and "Traceback" not in refused.stderr
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 3
    done = jobwarden("prune", "--older-than", "12h", "--yes")
    assert done.returncode == 0, done.stderr
    assert "pruned 3 job(s)" in done.stdout
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


@pytest.mark.parametrize("answer, left", [("n", 3), ("", 3), ("y", 0)])
def test_prune_on_a_terminal_deletes_only_when_the_operator_says_yes(conn, clean_db, answer,
                                                                     left):
    import pty

    old_finished_jobs(conn)
    controller, terminal = pty.openpty()
    try:
        os.write(controller, f"{answer}\n".encode())  # the terminal holds it until read
        result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "prune", "--older-than",
                                 "7d"], cwd=ROOT, stdin=terminal, capture_output=True,
                                text=True, timeout=60)
    finally:
        os.close(terminal)
        os.close(controller)
    assert "completed=2, skipped=1, cancelled=0" in result.stdout
    assert "delete these 3 job(s)? [y/N]" in result.stdout
    assert result.returncode == (0 if answer == "y" else 1), result.stderr
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == left


def test_recover_returns_an_expired_lease_to_pending(conn, clean_db):
    conn.execute("""
        INSERT INTO background_jobs (type, payload, status, attempts, execution_id, worker_id,
                                     heartbeat_at, lease_seconds, lease_expires_at)
        VALUES ('t', '{}', 'running', 1, gen_random_uuid(), 'dead-worker',
                now() - interval '5 minutes', 60, now() - interval '4 minutes');
        INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                                    scheduled_at, started_at)
        SELECT id, execution_id, 1, queue, type, worker_id, created_at, heartbeat_at
        FROM background_jobs""")
    conn.commit()
    result = jobwarden("recover")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"recovered": {"pending": 1}, "workers_gone": []}
    row = job_row(clean_db, 1)
    assert (row["status"], row["last_error_code"]) == ("pending", "WORKER_LOST")


def test_reconcile_lists_unknown_jobs_and_settles_one_with_an_audit_row(conn, clean_db):
    conn.execute("INSERT INTO background_jobs (type, payload, status, last_error_code) VALUES "
                 "('refund', '{}', 'unknown', 'AMBIGUOUS_OUTCOME'), "
                 "('refund', '{}', 'unknown', 'AMBIGUOUS_OUTCOME')")
    conn.commit()
    listed = jobwarden("reconcile")
    assert "2 job(s) in 'unknown'" in listed.stdout and "#1 refund" in listed.stdout
    done = jobwarden("reconcile", "1", "--as", "completed", "--reason",
                     "provider dashboard shows refund re_42", "--actor", "ann")
    assert done.returncode == 0, done.stderr
    assert "marked completed" in done.stdout
    retried = jobwarden("reconcile", "2", "--as", "retry", "--reason", "no refund at provider")
    assert retried.returncode == 0, retried.stderr
    again = jobwarden("reconcile", "1", "--as", "failed", "--reason", "changed my mind")
    assert again.returncode == 1  # completed: never moved again
    assert jobwarden("reconcile", "2", "--as", "skip").returncode == 2  # no reason
    pending = jobwarden("reconcile", "2", "--as", "skip", "--reason", "twice")
    assert pending.returncode == 1 and pending.stdout == ""
    assert pending.stderr == ("jobwarden reconcile: job #2 is pending, not unknown: reconcile "
                              "settles unknown jobs only; nothing was changed\n")
    assert scalar(clean_db, "SELECT array_agg(status ORDER BY id) FROM background_jobs") == [
        "completed", "pending"]
    assert scalar(clean_db, "SELECT array_agg(actor || ':' || action ORDER BY id) "
                            "FROM job_audit")[0] == "ann:mark_completed"


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_a_reader_that_went_away_ends_a_command_quietly(clean_db, unbuffered):
    # `jobwarden stats | head -1`: the pipe's reader is gone before the command writes.
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    try:
        proc = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "--log-level",
                               "WARNING", "stats"], cwd=ROOT, stdout=write,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == ""


def test_stats_with_nothing_pending_says_so_without_a_placeholder_row(clean_db):
    result = jobwarden("stats")
    assert result.returncode == 0, result.stderr
    assert "-: 0.0s" not in result.stdout
    assert "none: no job is waiting to run" in result.stdout


def _busy_port():
    """A port this test holds bound and listening, so nothing else can serve on it."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder, holder.getsockname()[1]


def test_a_busy_port_says_so_names_the_option_and_enqueues_nothing(clean_db):
    holder, port = _busy_port()
    with holder:
        demo = jobwarden("demo", "--exit-when-done", "--port", str(port),
                         "--yes-use-this-database")
        console = jobwarden("console", "--port", str(port))
    assert demo.returncode == 2 and console.returncode == 2
    for result in (demo, console):
        assert f"127.0.0.1:{port}" in result.stderr and "--port" in result.stderr
        assert "Traceback" not in result.stderr
    assert f"make demo PORT={port + 1}" in demo.stderr
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0
    assert scalar(clean_db, "SELECT count(*) FROM console_users") == 0  # nor the demo login


def test_demo_refuses_a_database_it_was_not_told_to_use_and_writes_nothing(clean_db):
    """DATABASE_URL may be a real database: the demo would plant an admin login whose
    password is in docs/development.md there, so it takes only the embedded server unasked."""
    result = jobwarden("demo", "--exit-when-done", "--port", "0")
    assert result.returncode == 2, result.stdout[-3000:]
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "DATABASE_URL" in result.stderr and "--yes-use-this-database" in result.stderr
    assert scalar(clean_db, "SELECT count(*) FROM console_users") == 0
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


def test_demo_stops_on_sigterm_like_ctrl_c_and_keeps_requests_off_the_terminal(clean_db):
    demo = start_process([sys.executable, "-m", "jobwarden.worker.cli", "demo", "--port", "0",
                          "--yes-use-this-database"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "console: http://" not in line:
            line = demo.stdout.readline()
            assert line, demo.communicate(timeout=60)[1][-3000:]  # exited before serving
        base = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)
        for _ in range(3):
            assert urllib.request.urlopen(f"{base}/login", timeout=30).status == 200
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM job_workers") == 1,
                 message="the demo's worker to register")
    finally:
        out, err = stop_process(demo, signal.SIGTERM)
    assert demo.returncode == 0, err[-3000:]
    assert "stopping…" in out and "Traceback" not in err
    assert "GET /login" not in out + err  # no access log line per request
    assert scalar(clean_db, "SELECT array_agg(state) FROM job_workers") == ["stopped"]
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE status = 'running'") == 0


def test_embedded_stop_stops_the_server_a_command_left_running(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["JOBWARDEN_HOME"] = str(tmp_path)
    pidfile = tmp_path / "pgdata" / "postmaster.pid"

    def run(*args):
        return subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=180)
    try:
        assert run("migrate").returncode == 0
        assert pidfile.is_file()  # still running after the command exited
        stopped = run("embedded", "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert "stopped the embedded PostgreSQL" in stopped.stdout
        assert not pidfile.exists()
        again = run("embedded", "stop")
        assert "is not running" in again.stdout and again.returncode == 0
    finally:
        if pidfile.exists():
            run("embedded", "stop")


def test_stored_text_is_printed_without_terminal_escapes(conn, clean_db):
    """A job's error (or a name, or an actor) may hold escape sequences that would clear
    the operator's screen or retitle their terminal: they are shown, not obeyed."""
    evil = "\x1b[2J\x1b]0;pwned\x07\u202eevil\r\x08\x9b31m"
    conn.execute("INSERT INTO background_jobs (type, queue, payload, status, last_error_code, "
                 "last_error) VALUES (%s, %s, '{}', 'unknown', %s, %s)",
                 [f"refund{evil}", f"q{evil}", f"CODE{evil}", f"error {evil} Bearer abc123"])
    conn.execute("INSERT INTO queue_controls (queue, paused, changed_by) VALUES (%s, true, %s)",
                 [f"q{evil}", f"mallory{evil}"])
    conn.commit()
    for args in (("reconcile",), ("queue", "list"), ("stats",)):
        out = jobwarden(*args)
        assert out.returncode == 0, out.stderr
        text = out.stdout
        assert not [c for c in text if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) < 0xa0
                    or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"], (args, text)
        assert "\\x1b" in text, (args, text)
    assert "abc123" not in jobwarden("reconcile").stdout


@pytest.mark.parametrize("args, option", [
    (("enqueue", "t", "--delay", "abc"), "--delay"),
    (("enqueue", "t", "--delay", "-5"), "--delay"),
    (("enqueue", "t", "--delay", "99999999999d"), "--delay"),
    (("enqueue", "t", "--payload", "{not json"), "--payload"),
    (("enqueue", "t", "--payload", "[1, 2]"), "--payload"),
    (("enqueue", "t", "--payload", "[" * 50_000 + "]" * 50_000), "--payload"),
    (("enqueue", "t", "--payload", '{"a":' * 100 + "1" + "}" * 100), "--payload"),
    (("enqueue", "t", "--idempotency-key", b"key-\xff\xfe"), "--idempotency-key"),
    (("enqueue", "t", "--idempotency-key", "k" * 501), "--idempotency-key"),
    (("enqueue", "t", "--priority", "99999999999"), "--priority"),
    (("enqueue", "t", "--max-attempts", "0"), "--max-attempts"),
    (("prune", "--older-than", "7days"), "--older-than"),
    (("prune", "--older-than", "0"), "--older-than"),
    (("recover", "--worker-stale-after", "abc"), "--worker-stale-after"),
    (("reconcile", "--limit", "-1"), "--limit"),
    (("reconcile", "99999999999999999999", "--as", "skip", "--reason", "r"), "job"),
    (("reconcile", "0", "--as", "skip", "--reason", "r"), "job"),
    (("console", "--port", "99999"), "--port"),
    (("demo", "--port", "-1"), "--port"),
    (("worker", "--app", "x", "--concurrency", "0"), "--concurrency"),
    # Worker tuning: negative, not-a-number and infinite values never reach the runtime.
    (("worker", "--app", "x", "--grace", "-1"), "--grace"),
    (("worker", "--app", "x", "--grace", "nan"), "--grace"),
    (("worker", "--app", "x", "--timeout-grace", "inf"), "--timeout-grace"),
    (("worker", "--app", "x", "--poll-interval", "0"), "--poll-interval"),
    (("worker", "--app", "x", "--poll-interval", "-inf"), "--poll-interval"),
    (("worker", "--app", "x", "--claim-batch", "-5"), "--claim-batch"),
    (("worker", "--app", "x", "--buffer", "-1"), "--buffer"),
    (("worker", "--app", "x", "--flush-batch", "0"), "--flush-batch"),
    (("worker", "--app", "x", "--flush-writers", "0"), "--flush-writers"),
    (("worker", "--app", "x", "--flush-writers", "9"), "--flush-writers"),
    (("worker", "--app", "x", "--flush-interval", "NaN"), "--flush-interval"),
    (("worker", "--app", "x", "--flush-interval", "-2"), "--flush-interval"),
    (("worker", "--app", "x", "--max-abandoned", "-1"), "--max-abandoned"),
    (("worker", "--app", "x", "--concurrency", "nan"), "--concurrency"),
    (("worker", "--app", "x", "--queues", "email=0"), "--queues"),
    (("worker", "--app", "x", "--queues", "email=four"), "--queues"),
    (("worker", "--app", "x", "--queues", "email=4,email=2"), "--queues"),
    (("worker", "--app", "x", "--queues", "email=4,,reports"), "--queues"),
    (("worker", "--app", "x", "--queues", ""), "--queues"),
    (("worker", "--app", "x", "--queues", "e mail=4"), "--queues"),
])
def test_bad_arguments_are_one_clear_error_and_change_nothing(clean_db, args, option):
    result = jobwarden(*args)
    assert result.returncode == 2, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert option in result.stderr, result.stderr
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


def test_a_bad_queues_spec_says_what_is_wrong(clean_db):
    result = jobwarden("worker", "--app", "x", "--queues", "email=4,reports=1,email")
    assert result.returncode == 2
    assert "argument --queues: queue 'email' is named twice" in result.stderr


def test_user_add_applies_the_name_policy_and_says_what_it_stored(clean_db):
    saved = jobwarden("user", "add", "ＮＩＮＡ", "--role", "viewer",
                      input="a fine long passphrase\n")
    assert saved.returncode == 0, saved.stderr
    assert "user 'nina' saved with role viewer" in saved.stdout
    refused = jobwarden("user", "add", "ada\u200b", "--role", "admin",
                        input="a fine long passphrase\n")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert scalar(clean_db, "SELECT array_agg(username) FROM console_users") == ["nina"]


def stored_user(url, name):
    return scalar(url, "SELECT array[password_hash, role, session_generation::text] "
                       "FROM console_users WHERE username = %s", [name])


def test_user_add_refuses_an_existing_name_and_points_to_user_reset(clean_db):
    assert jobwarden("user", "add", "nina", "--role", "viewer",
                     input="a fine long passphrase\n").returncode == 0
    before = stored_user(clean_db, "nina")
    again = jobwarden("user", "add", "Nina", "--role", "admin",
                      input="another long passphrase\n")
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "'nina' exists already" in again.stderr
    assert "jobwarden user reset nina" in again.stderr
    assert stored_user(clean_db, "nina") == before


def test_user_reset_sets_a_new_password_keeps_the_role_unless_told_and_ends_sessions(clean_db):
    assert jobwarden("user", "add", "nina", "--role", "viewer",
                     input="a fine long passphrase\n").returncode == 0
    (old_hash, _, generation) = stored_user(clean_db, "nina")
    reset = jobwarden("user", "reset", "nina", input="another long passphrase\n")
    assert reset.returncode == 0, reset.stderr
    assert "password of 'nina' reset (role viewer)" in reset.stdout
    new_hash, role, new_generation = stored_user(clean_db, "nina")
    assert (new_hash != old_hash, role, int(new_generation)) == (True, "viewer",
                                                                  int(generation) + 1)
    promoted = jobwarden("user", "reset", "nina", "--role", "operator",
                         input="a third long passphrase\n")
    assert promoted.returncode == 0, promoted.stderr
    assert stored_user(clean_db, "nina")[1] == "operator"


def test_user_reset_of_a_name_nobody_has_is_refused_and_adds_no_one(clean_db):
    result = jobwarden("user", "reset", "nobody", input="a fine long passphrase\n")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no user 'nobody'" in result.stderr and "jobwarden user add" in result.stderr
    assert scalar(clean_db, "SELECT count(*) FROM console_users") == 0


def test_a_worker_stopped_before_it_reached_the_database_never_says_it_started():
    env = dict(os.environ, DATABASE_URL=f"postgresql://postgres@127.0.0.1:{closed_port()}/x")
    worker = subprocess.Popen([sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "INFO",
                               "worker", "--app", "jobwarden.worker.demo_jobs"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        while not seen or "cannot register worker" not in seen[-1]:
            seen.append(worker.stdout.readline())
            assert seen[-1], "".join(seen)  # exited before it tried to register
        worker.send_signal(signal.SIGTERM)
        out = "".join(seen) + worker.communicate(timeout=60)[0]
    finally:
        if worker.poll() is None:
            worker.kill()
    assert "Traceback" not in out
    assert not re.search(r"worker \S+ started", out), out
    assert re.search(r"worker \S+ stopped before it started", out), out
