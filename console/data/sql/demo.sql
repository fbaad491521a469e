-- Queries of `jobwarden demo`.

-- name: demo_batch_summary
-- The demo batch's jobs with their state, for the closing table.
SELECT id, type, queue, status, attempts, max_attempts, last_error_code, last_error
FROM background_jobs WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id

-- name: demo_batch_unsettled
-- How many of the demo batch's jobs will still change by themselves.
SELECT count(*) FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('pending', 'running')

-- name: demo_user_exists
-- Whether the demo login exists already.
SELECT 1 FROM console_users WHERE username = %(username)s
