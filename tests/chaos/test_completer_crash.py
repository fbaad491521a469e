"""A worker killed (SIGKILL) while outcomes wait in its completer's buffer loses no job.

The outcomes of handlers that returned are not durable until the completer flushes
them. Here the flush never comes (a flush interval of ten minutes): the handlers have
returned, their jobs are still `running`, the heartbeat keeps their leases alive, and
then the process dies. Recovery must treat them as lost executions and run them again.
"""

from __future__ import annotations

import pytest

from tests.chaos.support import add_many, outcomes, settle
from tests.helpers import scalar, status_counts, wait_for

pytestmark = pytest.mark.chaos

JOBS = 12
NEVER_FLUSH = ("--flush-interval", "600000", "--flush-batch", "10000")


def test_outcomes_waiting_in_the_completer_of_a_killed_worker_are_recovered(
        workers, chaos_db):
    a = workers.start(concurrency=4, options=NEVER_FLUSH)
    # Short handlers without a business transaction: their outcomes go to the completer.
    ids = add_many(chaos_db, "chaos.cancellable", [{"steps": 1}] * JOBS)
    wait_for(lambda: scalar(chaos_db, "SELECT count(*) FROM chaos_events "
                                      "WHERE event = 'returned'") == JOBS,
             message="every handler to return")
    # Returned, yet unwritten: and kept alive past their 1 s lease by the heartbeat.
    wait_for(lambda: scalar(chaos_db, """
        SELECT bool_and(j.status = 'running' AND j.heartbeat_at > r.last + interval '1.5 s')
        FROM background_jobs j,
             (SELECT max(at) AS last FROM chaos_events WHERE event = 'returned') AS r"""),
             message="the waiting outcomes' leases to be renewed past one lease")
    assert status_counts(chaos_db) == {"running": JOBS}
    a.kill()

    workers.start()
    for job_id in ids:
        row = settle(chaos_db, job_id)
        assert (row["status"], row["attempts"]) == ("completed", 2)
        assert outcomes(chaos_db, job_id) == ["worker_lost", "completed"]
    assert scalar(chaos_db, "SELECT count(*) FROM chaos_events WHERE event = 'returned'") \
        == 2 * JOBS
