-- The console's reads of rate limits and live limits (Queues page, a job type's page).

-- name: console_limits
-- Every limited scope (a type that declares a rate limit, a queue or type with a live
-- limit) with its declared and live limits, who set the live one, when and why, and its
-- figures from the base tables: executions started in the last 10 seconds (the current
-- rate, per second, is a tenth of it; the running ones' start is on their job row, so
-- job_executions_all), jobs running, and due jobs waiting. The started count walks the
-- history's finish index over the last 10 seconds only (an execution ends after it
-- starts; bounded above too, so a never-analyzed table keeps the index); the others read
-- the running and pending rows through their partial indexes.
WITH scopes AS (
    SELECT 'type' AS scope, type AS name FROM job_types WHERE rate_limit IS NOT NULL
    UNION
    SELECT scope, name FROM job_limit_controls
)
SELECT s.scope, s.name, t.rate_limit AS declared_rate, t.rate_burst AS declared_burst,
       t.rate_limit_key, c.max_concurrency, c.rate AS live_rate, c.burst AS live_burst,
       c.set_by, c.set_role, c.set_at, c.reason,
       (SELECT count(*) FROM job_executions_all e
        WHERE e.started_at >= now() - interval '10 seconds'
          AND e.started_at < now() + interval '1 day'
          AND (e.finished_at >= now() - interval '10 seconds'
               AND e.finished_at < now() + interval '1 day' OR e.finished_at IS NULL)
          AND CASE WHEN s.scope = 'type' THEN e.type = s.name ELSE e.queue = s.name END)
           AS started_10s,
       (SELECT count(*) FROM background_jobs j
        WHERE j.status = 'running'
          AND CASE WHEN s.scope = 'type' THEN j.type = s.name ELSE j.queue = s.name END)
           AS running,
       (SELECT count(*) FROM background_jobs j
        WHERE j.status = 'pending' AND j.available_at <= now()
          AND CASE WHEN s.scope = 'type' THEN j.type = s.name ELSE j.queue = s.name END)
           AS waiting
FROM scopes s
LEFT JOIN job_types t ON s.scope = 'type' AND t.type = s.name
LEFT JOIN job_limit_controls c ON c.scope = s.scope AND c.name = s.name
WHERE %(scope)s::text IS NULL OR (s.scope = %(scope)s::text AND s.name = %(name)s::text)
ORDER BY s.scope, s.name;

-- name: console_job_type_policy
-- One job type's published policy (its page), or nothing if no worker published it.
SELECT type, queue, max_attempts, timeout_seconds, lease_seconds, sla_seconds, version,
       repeat_safe, concurrency_limit, rate_limit, rate_burst, rate_limit_key,
       fair_key, fair_weights, published_by, published_at
FROM job_types WHERE type = %(type)s::text;

-- name: console_fair_keys
-- A fair-keyed type's keys with pending jobs (its page, docs/guide/fair-share.md): each
-- key's backlog (pending jobs), how many of them are due, and the wait of its oldest due
-- job in seconds (NULL: none due yet); the `limit` keys whose oldest due job has waited
-- longest, and how many keys have pending jobs in all (`keys`). One pass over the type's
-- pending jobs that have a key (the walk the claims make would need the type's keys).
SELECT fair_key, backlog, due, oldest_wait_s, count(*) OVER () AS keys
FROM (SELECT fair_key, count(*) AS backlog,
             count(*) FILTER (WHERE available_at <= now()) AS due,
             extract(epoch FROM now() - min(available_at) FILTER (
                 WHERE available_at <= now()))::float8 AS oldest_wait_s
      FROM background_jobs
      WHERE status = 'pending' AND type = %(type)s::text AND fair_key IS NOT NULL
      GROUP BY fair_key) AS k
ORDER BY oldest_wait_s DESC NULLS LAST, fair_key
LIMIT %(limit)s::int;
