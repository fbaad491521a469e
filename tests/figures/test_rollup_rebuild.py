"""Rebuilding the rollups from the records gives what the trigger counted live."""

from __future__ import annotations

import psycopg

from jobwarden.worker.duties.recovery import recover_stale_running
from tests.figures.conftest import registry, rows, take


def minute_counts(url: str) -> dict[tuple, int]:
    return {tuple(r[:-1]): r[-1] for r in rows(
        url, "SELECT minute, queue, type, outcome, error_code, jobs FROM job_minute_counts "
             "WHERE jobs <> 0")}


def count_deltas(url: str) -> dict[tuple, int]:
    return {tuple(r[:-1]): r[-1] for r in rows(
        url, "SELECT status, queue, type, sum(jobs) FROM job_count_deltas "
             "GROUP BY 1, 2, 3 HAVING sum(jobs) <> 0")}


def test_a_rebuild_counts_each_outcome_as_the_trigger_did(seeded):
    live, counts = minute_counts(seeded.url), count_deltas(seeded.url)
    # The live counts hold retries, a recovery, a hand-back left out, unknown outcomes
    # and operator moves: the rebuild must find each of them in the records.
    outcomes = {k[3] for k in live}
    assert outcomes == {"completed", "retried", "failed", "unknown", "skipped", "cancelled",
                        "snoozed"}
    with psycopg.connect(seeded.url) as conn:
        conn.execute("SELECT jobwarden_rollup_rebuild()")
    rebuilt = minute_counts(seeded.url)
    # The old failures were written as rows, not reached through a statement the trigger
    # saw: the rebuild counts the two still failed at the time they failed (the third
    # was skipped by an operator, whose audit row is its only record).
    (failed_at,) = rows(seeded.url, "SELECT DISTINCT date_trunc('minute', failed_at) "
                                    "FROM background_jobs WHERE id = ANY(%s) "
                                    "AND status = 'failed'", [seeded.ids["old_failed"]])
    written = {(failed_at[0], "billing", "bill.charge", "failed", "PROVIDER_DOWN"): 2}
    assert rebuilt == {**live, **written}
    assert count_deltas(seeded.url) == counts


def test_a_rebuild_tells_a_lost_workers_retry_from_its_final_failure(seeded):
    """`worker_lost` ends in a retry or for good: the job's next record says which."""
    reg = registry()
    with psycopg.connect(seeded.url) as conn:
        # One recovered job runs its last attempt, and that worker is lost too: the
        # recovery fails it for good (no operator, no further execution).
        job_id = seeded.ids["recovered"][0]
        conn.execute("UPDATE background_jobs SET available_at = now(), "
                     "max_attempts = attempts + 1 WHERE id = %s", [job_id])
        conn.execute("UPDATE background_jobs SET available_at = now() + interval '1 day' "
                     "WHERE status = 'pending' AND id <> %s", [job_id])
        conn.commit()
        (again,) = take(conn, 1)
        assert again.id == job_id
        conn.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 s' "
                     "WHERE id = %s", [job_id])
        conn.commit()
        assert recover_stale_running(conn, reg) == {"failed": 1}
        conn.commit()
    live = minute_counts(seeded.url)
    with psycopg.connect(seeded.url) as conn:
        conn.execute("SELECT jobwarden_rollup_rebuild()")
    rebuilt = minute_counts(seeded.url)
    lost_as = {k[3]: v for k, v in rebuilt.items() if k[4] == "WORKER_LOST"}
    assert lost_as == {"retried": 2, "failed": 1}
    assert {k: v for k, v in live.items() if k[4] == "WORKER_LOST"} == \
        {k: v for k, v in rebuilt.items() if k[4] == "WORKER_LOST"}
