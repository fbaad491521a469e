-- Needs review at scale (console/views/review.py, console/data/review.py): unknown jobs
-- grouped by type, error code and what their reconciler said (migration 0077); a
-- group's jobs are console_unknown_jobs' (console.sql).

-- name: console_unknown_groups
-- Unknown jobs by (type, error code, reconciler's verdict): how many, the newest and the
-- oldest id. Read from background_jobs_unknown_idx alone (it holds every column here and
-- unknown jobs only), in its order: no read of a job's row, no sort of the jobs. The
-- page sorts the groups (at most `limit`, the first in the index's order).
SELECT type, last_error_code, reconcile_verdict, count(*) AS jobs, max(id) AS newest_id,
       min(id) AS oldest_id
FROM background_jobs
WHERE status = 'unknown'
GROUP BY type, last_error_code, reconcile_verdict
ORDER BY type, last_error_code, reconcile_verdict
LIMIT %(limit)s::int;

-- name: console_unknown_group_of
-- The group of an unknown job (none for a job no longer unknown): a group is named by
-- one of its jobs, never by its code in a URL.
SELECT type, last_error_code, reconcile_verdict
FROM background_jobs
WHERE id = %(job_id)s::bigint AND status = 'unknown';
