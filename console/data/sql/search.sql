-- The console's search (console/data/search.py): a job by id, idempotency key, payload
-- value or error text. An id and a key are index look-ups over every job; a payload value
-- and an error text scan one window of consecutive ids, [floor, top), newest first.

-- name: console_search_time_limit
-- How long each statement of this search's transaction may run (milliseconds): a search
-- must answer, or say it was too slow, well before the web server gives up on it.
SELECT set_config('statement_timeout', %(ms)s::text, true) AS statement_timeout;

-- name: console_search_newest
-- The newest job's id: the first window ends there.
SELECT coalesce(max(id), 0) AS newest FROM background_jobs;

-- name: console_search
-- Jobs with ids in [floor, top), newest first, matching the one criterion given: an id,
-- an idempotency key, the ids of a flow (its walk's), a batch's members, a value at a
-- payload path (any of `values`, JSON texts) or an ILIKE pattern over the last error's
-- message or code. `matched` is what matched (the
-- console keeps an error's row only if it matches as redacted, too).
-- A null bound is none: an id or key search over every job (a bound of 0..2^63 made the
-- planner AND a bitmap of every id with the key's).
SELECT id, queue, type, status, attempts, max_attempts, last_error_code, idempotency_key,
       created_at,
       -- The whole error: the console redacts it before it cuts it (console/data/search.py).
       CASE WHEN %(path)s::text[] IS NOT NULL THEN left((payload #> %(path)s::text[])::text, 200)
            WHEN %(pattern)s::text IS NOT NULL THEN last_error END AS matched
FROM background_jobs
WHERE (%(top)s::bigint IS NULL OR id < %(top)s::bigint)
  AND (%(floor)s::bigint IS NULL OR id >= %(floor)s::bigint)
  AND (%(job_id)s::bigint IS NULL OR id = %(job_id)s::bigint)
  AND (%(key)s::text IS NULL OR idempotency_key = %(key)s::text)
  AND (%(flow_ids)s::bigint[] IS NULL OR id = ANY(%(flow_ids)s::bigint[]))
  AND (%(batch)s::bigint IS NULL OR batch_id = %(batch)s::bigint)
  AND (%(path)s::text[] IS NULL OR payload #> %(path)s::text[] = ANY(%(values)s::jsonb[]))
  AND (%(pattern)s::text IS NULL
       OR last_error ILIKE %(pattern)s::text OR last_error_code ILIKE %(pattern)s::text)
  -- A range of creation times: its ids (console/data/find.py), created_at tested in them.
  AND (%(created_from)s::timestamptz IS NULL
       OR (id >= %(from_id)s::bigint AND created_at >= %(created_from)s::timestamptz))
  AND (%(created_to)s::timestamptz IS NULL
       OR (id < %(to_id)s::bigint AND created_at < %(created_to)s::timestamptz))
-- A key or batch search orders by `id + 0`, which no index provides: on never-analyzed
-- tables the planner would otherwise walk the primary key backwards hoping to meet the
-- key soon (every job: 370 ms at 10,000,000), rather than look the key (or the batch's
-- members) up and sort what it finds.
ORDER BY CASE WHEN %(key)s::text IS NULL AND %(batch)s::bigint IS NULL THEN id ELSE id + 0 END DESC
LIMIT %(limit)s::int;
