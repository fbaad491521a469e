-- A job type's handler durations over time, and the moments a new version or a worker
-- started (console/data/durations.py; the type's page draws them).

-- name: console_type_duration_window
-- The window's last bucket (the current one, still filling), as a multiple of bucket_s
-- seconds since the epoch, from the transaction's clock the other reads share.
SELECT floor(extract(epoch FROM now()) / %(bucket_s)s::int)::bigint AS last_bucket;

-- name: console_type_durations
-- p50 and p95 of the handler's duration (exact: percentile_cont) and how many executions,
-- per bucket of bucket_s seconds by when each ended, for the buckets `first` to `last`
-- (multiples of bucket_s seconds since the epoch); only the buckets with executions. The
-- executions a handler ended (returned, raised, or was stopped by its timeout): the
-- predicate of job_executions_type_duration_idx (migration 0078), so each bucket is an
-- index-only scan of one type's rows in its range, in the partition that holds it. One
-- bucket at a time (a LATERAL per bucket), so each percentile sorts one bucket's rows in
-- memory: grouped over the range at once, the week's rows of a busy type were sorted
-- together on disk first (1.16 s against 0.69 s for 1,000,000 executions).
-- A lost worker's execution (its duration ends at its last heartbeat), a hand-back, a
-- cancel or an unknown end is no handler's duration.
SELECT b.n AS bucket, d.executions, d.p50_ms, d.p95_ms
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS b (n)
CROSS JOIN LATERAL (
    SELECT count(duration_ms) AS executions,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50_ms,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms
    FROM job_executions
    WHERE type = %(type)s::text
      AND finished_at >= to_timestamp(b.n * %(bucket_s)s::int)
      AND finished_at < to_timestamp((b.n + 1) * %(bucket_s)s::int)
      AND outcome IN ('completed', 'retry', 'failed', 'skipped', 'snoozed', 'timeout')
) d
WHERE d.executions > 0;

-- name: console_type_versions
-- The type's versions first published from an hour before `since` on (job_type_versions,
-- migration 0078), each with the start of the first execution of the type that its first
-- worker ended within an hour of publishing it (NULL: none; the chart then marks the
-- publication). The look-up walks the type's executions from the publication, in the
-- duration index, until that worker's first: a few rows while it runs the type.
SELECT v.version, v.first_at, v.first_by,
       (SELECT e.started_at FROM job_executions e
        WHERE e.type = v.type AND e.worker_id = v.first_by
          AND e.finished_at >= v.first_at AND e.finished_at < v.first_at + interval '1 hour'
          AND e.outcome IN ('completed', 'retry', 'failed', 'skipped', 'snoozed', 'timeout')
        ORDER BY e.finished_at LIMIT 1) AS first_run_at
FROM job_type_versions v
WHERE v.type = %(type)s::text AND v.first_at >= %(since)s::timestamptz - interval '1 hour'
ORDER BY v.version;

-- name: console_type_worker_starts
-- Workers that handle the type and started in the window, oldest first, at most `limit`:
-- a deploy restarts them, so their starts mark deploy-like moments even when no version
-- changed. job_workers holds a row per worker process ever started (a few per deploy).
SELECT worker_id, host, started_at FROM job_workers
WHERE %(type)s::text = ANY(job_types)
  AND started_at >= %(since)s::timestamptz AND started_at < %(until)s::timestamptz
ORDER BY started_at, worker_id
LIMIT %(limit)s::int;
