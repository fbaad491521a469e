-- The console's search (console/data/search.py): a job by id, idempotency key, payload
-- value or error text. An id and a key are index look-ups over every job; a payload value
-- and an error text scan one window of consecutive ids, [floor, top), newest first.

-- name: console_search_newest
-- The newest job's id: the first window ends there.
SELECT coalesce(max(id), 0) AS newest FROM background_jobs;

-- name: console_search
-- Jobs with ids in [floor, top), newest first, matching the one criterion given: an id,
-- an idempotency key, a value at a payload path (any of `values`, JSON texts) or an
-- ILIKE pattern over the last error's message or code. `matched` is what matched.
SELECT id, queue, type, status, attempts, max_attempts, last_error_code, idempotency_key,
       created_at,
       CASE WHEN %(path)s::text[] IS NOT NULL THEN left((payload #> %(path)s::text[])::text, 200)
            WHEN %(pattern)s::text IS NOT NULL THEN left(last_error, 200) END AS matched
FROM background_jobs
WHERE id < %(top)s::bigint AND id >= %(floor)s::bigint
  AND (%(job_id)s::bigint IS NULL OR id = %(job_id)s::bigint)
  AND (%(key)s::text IS NULL OR idempotency_key = %(key)s::text)
  AND (%(path)s::text[] IS NULL OR payload #> %(path)s::text[] = ANY(%(values)s::jsonb[]))
  AND (%(pattern)s::text IS NULL
       OR last_error ILIKE %(pattern)s::text OR last_error_code ILIKE %(pattern)s::text)
ORDER BY id DESC
LIMIT %(limit)s::int;
