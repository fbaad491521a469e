"""Rebuilding the rollups counts what the trigger counts: outcomes as they were recorded.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01

`jobwarden_rollup_rebuild()` (migration 0009; demo data, repair after a restore) counted
each job once, by the status it is in now, and retries only from executions that ended
`retry`. The trigger (migration 0018) counts every move to an outcome as it happens. The
two disagreed: a recovered execution (`worker_lost`) was a retry live and nothing after a
rebuild; unknown outcomes, an execution's failure later retried by an operator, and the
operator's own moves (skip, cancel, resolve) were lost.

The rebuild now reads the three records of how work ended, each once:

* every finished execution but a hand-back, by its recorded outcome. `worker_lost` and
  `timeout` end either in a retry or for good; the status they moved the job to is the
  one the job's next record starts from: the first operator action after it (its
  `from_status`), else `pending` when another execution followed, else the job's status;
* every operator move to an outcome (`job_audit`, from one status to another);
* jobs in an outcome with neither record (rows written directly: imports, demo data),
  at the time they reached it.

What it cannot know it leaves out: the codes of executions whose jobs retention deleted
(their executions went with them), and an outcome an operator later changed without
an execution or audit row saying what it was.
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_SHARED_HEAD = """
        CREATE OR REPLACE FUNCTION jobwarden_rollup_rebuild() RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            LOCK TABLE background_jobs IN SHARE MODE;
            DELETE FROM job_count_deltas;
            DELETE FROM job_minute_counts;
            INSERT INTO job_count_deltas (status, queue, type, jobs)
            SELECT status, queue, type, count(*) FROM background_jobs
            GROUP BY status, queue, type;
"""


def upgrade() -> None:
    op.execute(_SHARED_HEAD + """
            INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
            SELECT date_trunc('minute', at), queue, type, outcome,
                   CASE WHEN outcome IN ('failed', 'unknown', 'retried')
                        THEN coalesce(error_code, '') ELSE '' END,
                   count(*)
            FROM (
                SELECT e.finished_at AS at, e.queue, e.type, e.error_code,
                       CASE WHEN e.outcome = 'retry' THEN 'retried'
                            WHEN e.outcome NOT IN ('worker_lost', 'timeout') THEN e.outcome
                            WHEN coalesce(op.from_status,
                                          CASE WHEN nxt.started_at IS NOT NULL
                                               THEN 'pending' END,
                                          j.status) IN ('pending', 'running') THEN 'retried'
                            ELSE coalesce(op.from_status, j.status) END AS outcome
                FROM job_executions e
                JOIN background_jobs j ON j.id = e.job_id
                LEFT JOIN LATERAL (
                    SELECT min(n.started_at) AS started_at FROM job_executions n
                    WHERE n.job_id = e.job_id AND n.started_at > e.started_at
                ) nxt ON e.outcome IN ('worker_lost', 'timeout')
                LEFT JOIN LATERAL (
                    SELECT a.from_status FROM job_audit a
                    WHERE a.job_id = e.job_id AND a.at >= e.finished_at
                      AND (nxt.started_at IS NULL OR a.at < nxt.started_at)
                    ORDER BY a.at, a.id LIMIT 1
                ) op ON e.outcome IN ('worker_lost', 'timeout')
                WHERE e.finished_at > now() - interval '8 days'
                  AND e.outcome <> 'handed_back'
                UNION ALL
                SELECT a.at, j.queue, j.type, j.last_error_code, a.to_status
                FROM job_audit a JOIN background_jobs j ON j.id = a.job_id
                WHERE a.at > now() - interval '8 days'
                  AND a.from_status IS DISTINCT FROM a.to_status
                  AND a.to_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
                UNION ALL
                SELECT jobwarden_finished_at(j.status, j.completed_at, j.failed_at,
                                             j.cancelled_at, j.skipped_at, j.created_at),
                       j.queue, j.type, j.last_error_code, j.status
                FROM background_jobs j
                WHERE j.status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
                  AND NOT EXISTS (SELECT 1 FROM job_executions e WHERE e.job_id = j.id)
                  AND NOT EXISTS (SELECT 1 FROM job_audit a WHERE a.job_id = j.id)
            ) o
            WHERE at > now() - interval '8 days'
            GROUP BY 1, 2, 3, 4, 5;
        END $$;
    """)


def downgrade() -> None:
    op.execute(_SHARED_HEAD + """
            INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
            SELECT date_trunc('minute', at), queue, type, outcome, error_code, count(*)
            FROM (
                SELECT queue, type, status AS outcome,
                       CASE WHEN status = 'failed' THEN coalesce(last_error_code, '')
                            ELSE '' END AS error_code,
                       CASE status WHEN 'completed' THEN completed_at
                                   WHEN 'failed' THEN failed_at
                                   WHEN 'cancelled' THEN cancelled_at
                                   WHEN 'skipped' THEN skipped_at END AS at
                FROM background_jobs
                WHERE status IN ('completed', 'failed', 'cancelled', 'skipped')
                UNION ALL
                SELECT queue, type, 'retried', coalesce(error_code, ''), finished_at
                FROM job_executions
                WHERE outcome = 'retry' AND finished_at > now() - interval '8 days'
            ) o
            WHERE at > now() - interval '8 days'
            GROUP BY 1, 2, 3, 4, 5;
        END $$;
    """)
