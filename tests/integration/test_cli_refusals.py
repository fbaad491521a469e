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


@pytest.mark.parametrize("retention", ["executions=30d", "executions=89d",
                                       "completed=120d,executions=100d"])
def test_a_worker_refuses_a_retention_that_drops_history_of_jobs_it_keeps(clean_db,
                                                                         retention):
    env = dict(os.environ, JOBWARDEN_RETENTION=retention)
    try:
        result = subprocess.run([sys.executable, "-m", "worker.cli", "--log-level", "WARNING",
                                 "worker", "--app", "worker.demo_jobs"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker ran with JOBWARDEN_RETENTION={retention}")
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1, result.stderr
    assert "shorter than" in result.stderr and "executions=" in result.stderr
    assert scalar(clean_db, "SELECT count(*) FROM job_workers") == 0
