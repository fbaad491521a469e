"""What the command line refuses, in one line, changing nothing: a live limit on a queue
nothing names (as `queue pause` refuses one), a retention that would drop the history of
jobs it keeps; and a sub-command package that cannot load is named, not lost."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import scalar
from tests.integration.test_cli import ROOT, jobwarden


def limits_written(url: str) -> tuple[int, int]:
    return (scalar(url, "SELECT count(*) FROM job_limit_controls"),
            scalar(url, "SELECT count(*) FROM job_audit"))


def test_a_live_limit_on_a_queue_nothing_names_is_refused_like_a_pause(conn, clean_db):
    conn.execute("INSERT INTO background_jobs (type, queue, payload) VALUES ('mail', 'email', "
                 "'{}')")
    conn.commit()
    typo = jobwarden("limits", "set", "--queue", "emial", "--rate", "10/s", "--reason", "r")
    assert typo.returncode == 1, typo.stderr
    assert typo.stderr.count("\n") == 1 and "queue 'emial' is unknown" in typo.stderr
    assert typo.stdout == ""
    assert limits_written(clean_db) == (0, 0)
    # The same name, as `queue pause` refuses it.
    assert jobwarden("queue", "pause", "emial", "--reason", "r").returncode == 1
    # The queue a job names is known: its limit is set.
    known = jobwarden("limits", "set", "--queue", "email", "--rate", "10/s", "--reason", "r")
    assert known.returncode == 0, known.stderr
    assert limits_written(clean_db) == (1, 1)


def test_a_live_limit_on_a_type_nothing_names_is_refused_as_a_queue_is(conn, clean_db):
    conn.execute("INSERT INTO background_jobs (type, queue, payload) VALUES ('mail', 'email', "
                 "'{}')")
    conn.commit()
    typo = jobwarden("limits", "set", "--type", "mial", "--rate", "10/s", "--reason", "r")
    assert typo.returncode == 1, typo.stderr
    assert typo.stderr == ("jobwarden limits: job type 'mial' is unknown: no job, published "
                           "job type or live limit names it; nothing was changed (--new "
                           "limits it before its first job)\n")
    assert limits_written(clean_db) == (0, 0)
    known = jobwarden("limits", "set", "--type", "mail", "--rate", "10/s", "--reason", "r")
    assert known.returncode == 0, known.stderr
    ahead = jobwarden("limits", "set", "--type", "report", "--max-concurrency", "2", "--new",
                      "--reason", "before the deploy")
    assert ahead.returncode == 0, ahead.stderr
    assert limits_written(clean_db) == (2, 2)


def test_a_queue_not_in_use_yet_gets_a_limit_when_named_new_and_is_known_after(clean_db):
    ahead = jobwarden("limits", "set", "--queue", "reports", "--max-concurrency", "2", "--new",
                      "--reason", "before the deploy")
    assert ahead.returncode == 0, ahead.stderr
    # Its live limit names it now: changing it needs no --new.
    again = jobwarden("limits", "set", "--queue", "reports", "--max-concurrency", "3",
                      "--reason", "more")
    assert again.returncode == 0, again.stderr
    assert limits_written(clean_db) == (1, 2)


def test_a_bad_limit_on_an_unknown_queue_names_the_bad_value_first(clean_db):
    bad = jobwarden("limits", "set", "--queue", "emial", "--rate", "fast", "--reason", "r")
    assert bad.returncode == 2 and "rate" in bad.stderr
    assert limits_written(clean_db) == (0, 0)


@pytest.fixture
def broken_command_packages(tmp_path):
    """Two installed packages adding `jobwarden` sub-commands whose entry points fail to
    load: one names a module that is not there, one a module that raises on import."""
    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('no config file')\n")
    for name, target in (("gone", "no_such_module_here:register"),
                         ("raising", "raises_on_import:register")):
        info = tmp_path / f"jobwarden_{name}_commands-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: jobwarden-{name}-"
                                       "commands\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[jobwarden.commands]\n{name} = {target}\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]))


def test_a_sub_command_package_that_fails_to_load_is_named_and_the_rest_still_work(
        broken_command_packages, clean_db):
    result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "user", "--help"], cwd=ROOT,
                            env=broken_command_packages, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "add a console user" in result.stdout  # the console's commands are there
    lines = result.stderr.splitlines()
    assert lines == [
        "jobwarden: the sub-commands of entry point 'gone' (no_such_module_here:register) "
        "are left out: ModuleNotFoundError: No module named 'no_such_module_here'",
        "jobwarden: the sub-commands of entry point 'raising' (raises_on_import:register) "
        "are left out: RuntimeError: no config file"], result.stderr


@pytest.mark.parametrize("retention", ["executions=30d", "executions=89d",
                                       "completed=120d,executions=100d"])
def test_a_worker_refuses_a_retention_that_drops_history_of_jobs_it_keeps(clean_db,
                                                                         retention):
    env = dict(os.environ, JOBWARDEN_RETENTION=retention)
    try:
        result = subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING",
                                 "worker", "--app", "jobwarden.worker.demo_jobs"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker ran with JOBWARDEN_RETENTION={retention}")
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1, result.stderr
    assert "shorter than" in result.stderr and "executions=" in result.stderr
    assert scalar(clean_db, "SELECT count(*) FROM job_workers") == 0
