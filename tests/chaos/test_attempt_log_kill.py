"""A worker killed (kill -9) while an attempt that logged is running: that attempt's lines
were only in the dead process's memory, so none is kept; its execution is recorded
worker_lost by recovery, with no lines, and the next attempt keeps its own
(docs/faults.md, "Each attempt's log lines")."""

from __future__ import annotations

import pytest

from tests.chaos.support import add, events, outcomes, settle
from tests.helpers import scalar, wait_for

pytestmark = pytest.mark.chaos


def test_a_worker_killed_mid_attempt_keeps_no_line_of_that_attempt(workers, chaos_db):
    a = workers.start("tests.apps.attempt_log_app")
    job_id = add(chaos_db, "logs.killed")
    wait_for(lambda: events(chaos_db, job_id), message="the first attempt to log and start")
    a.kill()
    workers.start("tests.apps.attempt_log_app")
    row = settle(chaos_db, job_id)
    assert (row["status"], row["attempts"]) == ("completed", 2)
    assert outcomes(chaos_db, job_id) == ["worker_lost", "completed"]
    kept = scalar(chaos_db, """
        SELECT array_agg(e.attempt) FROM job_execution_logs l
        JOIN job_executions e USING (execution_id) WHERE l.job_id = %s""", [job_id])
    assert kept == [2]  # the killed attempt's lines died with its process
    lines = scalar(chaos_db, "SELECT lines FROM job_execution_logs WHERE job_id = %s", [job_id])
    assert [line[3] for line in lines][:5] == [f"attempt 2 line {i}" for i in range(5)]
    assert "tok_secret_123456" not in str(lines) and "[REDACTED]" in lines[5][3]
