-- Expiry (migration 0081, worker/duties/expiry.py): jobs not started by their deadline.
-- The claims never start such a job (their `expires_at` test); these statements end it.

-- name: expire_jobs
-- End at most `limit` pending jobs past their deadline: failed, code EXPIRED, no execution
-- (none started), counted in job_event_totals ('expired') in the same statement. The walk
-- reads background_jobs_expiring_idx, which holds only pending jobs with a deadline;
-- rows a claim or another worker's pass holds are skipped, and the UPDATE re-checks both
-- conditions (compare-and-set: a job claimed meanwhile is running and is left alone).
-- Returns the jobs ended, with what their dependents and batch need (as operator actions).
WITH due AS (
    SELECT id FROM background_jobs
    WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= now()
    ORDER BY expires_at
    LIMIT %(limit)s::int
    FOR UPDATE SKIP LOCKED
), ended AS (
    UPDATE background_jobs j
    SET status = 'failed', failed_at = now(), last_error_code = 'EXPIRED',
        last_error = 'not started before its deadline, '
                     || to_char(j.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
    FROM due d
    WHERE j.id = d.id AND j.status = 'pending' AND j.expires_at <= now()
    RETURNING j.id, j.type, j.dependents, j.batch_id
), counted AS (
    -- In type order, as count_events, so two passes lock their rows in one order.
    INSERT INTO job_event_totals AS t (event, type, total)
    SELECT 'expired', type, count(*) FROM ended GROUP BY type ORDER BY type
    ON CONFLICT (event, type) DO UPDATE SET total = t.total + excluded.total,
                                            updated_at = now()
)
SELECT id, type, dependents > 0 AS has_dependents, batch_id FROM ended ORDER BY id
