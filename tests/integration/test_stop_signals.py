"""A worker stopped while it loads (worker/engine/stop_signals.py): SIGTERM or SIGINT
before the worker's own handlers are in ends it with status 0, before it registers and
claims anything, whichever way it was started. Every other command still ends on the
signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psycopg
import pytest

from jobwarden import enqueue
from tests.helpers import scalar, start_process, stop_processes, wait_for
from tests.integration.test_worker_heap import ENTRY, MODULE, ROOT


@pytest.mark.parametrize("way, signum", [(ENTRY, signal.SIGTERM), (MODULE, signal.SIGTERM),
                                         (ENTRY, signal.SIGINT)],
                         ids=["command-sigterm", "module-sigterm", "command-sigint"])
def test_a_worker_stopped_while_its_app_loads_exits_0_having_claimed_nothing(
        clean_db, tmp_path, way, signum):
    with psycopg.connect(clean_db) as conn:
        enqueue(conn, "slow_load.noop", {})
    marker = tmp_path / "loading"
    env = {**os.environ, "DATABASE_URL": clean_db, "SLOW_LOAD_MARKER": str(marker)}
    proc = start_process([sys.executable, *way, "worker", "--app", "tests.apps.slow_load_app"],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(marker.exists, timeout=60, message="the app to begin loading")
    [(_, err)] = stop_processes([proc], signum)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "stopped before it started" in err.decode()
    assert "Traceback" not in err.decode()
    assert scalar(clean_db, "SELECT count(*) FROM job_workers") == 0
    assert scalar(clean_db, "SELECT status FROM background_jobs") == "pending"


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, -signal.SIGTERM),
                                             (signal.SIGINT, 130)], ids=["sigterm", "sigint"])
def test_a_second_signal_stops_a_worker_whose_app_import_hangs(clean_db, tmp_path, signum,
                                                                status):
    """The first signal is recorded and the import goes on (an app whose import never
    ends would then hold the worker until a SIGKILL); the second acts as it always did:
    SIGTERM's default ends the process, SIGINT's KeyboardInterrupt is the command's
    status 130."""
    marker = tmp_path / "loading"
    env = {**os.environ, "DATABASE_URL": clean_db, "SLOW_LOAD_MARKER": str(marker),
           "SLOW_LOAD_SECONDS": "600"}
    proc = start_process([sys.executable, *ENTRY, "worker", "--app", "tests.apps.slow_load_app"],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(marker.exists, timeout=60, message="the app to begin loading")
        proc.send_signal(signum)
        with pytest.raises(subprocess.TimeoutExpired):  # recorded: the import goes on
            proc.wait(timeout=0.5)
        proc.send_signal(signum)
        proc.wait(timeout=30)
    finally:
        stop_processes([proc], signal.SIGKILL)
    assert proc.returncode == status
    assert scalar(clean_db, "SELECT count(*) FROM job_workers") == 0


def test_any_other_command_still_ends_on_a_signal_that_came_while_it_loaded():
    """release() sends a recorded signal again once the command is known not to be a
    worker: the default handler ends the process, as before."""
    code = ("import os, signal, time; from jobwarden.worker.engine import stop_signals; "
            "stop_signals.hold(); os.kill(os.getpid(), signal.SIGTERM); "
            "print('recorded', flush=True); stop_signals.release(); time.sleep(5); "
            "print('not ended')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (-signal.SIGTERM, "recorded\n"), done.stderr


def test_a_command_that_is_not_a_worker_lets_the_handlers_go(clean_db):
    """`jobwarden migrate` through the entry point: the default handlers are back once
    its arguments are read (a held SIGTERM would be ignored for the whole command)."""
    code = ("import signal, sys; from jobwarden.worker.cli import commands; "
            "commands.cmd_migrate = lambda args: print(signal.getsignal(signal.SIGTERM) "
            "is signal.SIG_DFL) or 0; "
            "from jobwarden.command import main; sys.argv = ['jobwarden', 'migrate']; "
            "sys.exit(main())")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "DATABASE_URL": clean_db})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "True"
