"""A value PostgreSQL would refuse as JSON, handed over by one job's handler, against
real worker processes: it never stops the heartbeat that renews every lease of its
worker, so the job beside it runs to its end, once.

The heartbeat writes all its worker's running jobs' progress and checkpoints in one
statement. A NaN in one job's progress, or a checkpoint changed to hold a datetime after
it was saved, once made every beat fail: the leases lapsed, another worker recovered
every job of the worker, and a finished job that was unsafe to repeat went to `unknown`
(docs/faults.md, "Progress and checkpoints").
"""

from __future__ import annotations

import psycopg
import pytest

from tests.chaos.support import add, events, running_on, settle
from tests.helpers import executions, job_row, wait_for

pytestmark = pytest.mark.chaos


def renewed_past_three_leases(url: str, job_id: int) -> bool:
    """Whether the job still runs its first execution and its lease has been renewed
    past three leases after its handler started (a lapse would have ended it)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT j.status = 'running' AND j.attempts = 1 AND j.heartbeat_at > "
            "e.at + 3 * make_interval(secs => j.lease_seconds) FROM background_jobs j "
            "JOIN chaos_events e ON e.job_id = j.id AND e.event = 'started' "
            "WHERE j.id = %s", [job_id]).fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("kind", ["nan_progress", "changed_checkpoint"])
def test_a_refused_value_in_one_job_never_stops_the_leases_of_the_job_beside_it(
        workers, chaos_db, kind):
    first = workers.start(concurrency=2)
    bad = add(chaos_db, "chaos.bad_values", {"kind": kind})
    innocent = add(chaos_db, "chaos.gated")
    running_on(chaos_db, bad)
    running_on(chaos_db, innocent)
    # Another worker, to recover whatever job's lease lapses.
    workers.start(concurrency=2)

    for job_id in (innocent, bad):
        wait_for(lambda job_id=job_id: renewed_past_three_leases(chaos_db, job_id),
                 message=f"job {job_id}'s lease to be renewed past three leases")
    with psycopg.connect(chaos_db) as conn:
        conn.execute("INSERT INTO chaos_gates (job_id) VALUES (%s), (%s)", [bad, innocent])

    done = settle(chaos_db, innocent)
    assert (done["status"], done["attempts"]) == ("completed", 1)
    assert [e["outcome"] for e in executions(chaos_db, innocent)] == ["completed"]
    assert [e[2] for e in events(chaos_db, innocent)] == ["started", "returned"]
    bad_row = settle(chaos_db, bad)
    assert (bad_row["status"], bad_row["attempts"]) == ("completed", 1)
    if kind == "nan_progress":
        # The report with a NaN is dropped, saying so; the one before it stands.
        assert bad_row["progress"] == {"processed": 0, "total": 10}
        assert first.logged("progress not recorded")
    else:
        # Stored as it was when saved: the change made afterwards is not in it.
        assert job_row(chaos_db, bad)["checkpoint"] == {"page": 1}
    assert not first.logged("heartbeat error")
