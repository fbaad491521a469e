-- The reads behind GET /metrics beyond the overview's (console/views/metrics.py).
-- Windows are trailing ("finished in the last 5 minutes"), not totals since the start:
-- retention deletes old executions, and a total that shrinks would look like a counter
-- reset to Prometheus, turning every retention batch into a spike of rate().
-- A trailing window also has an upper bound no row reaches (`< now() + interval '1 day'`):
-- on never-analyzed tables the planner takes a one-sided range for a third of the table
-- (a parallel scan of every execution, with JIT: 600–700 ms a query at 10,000,000 jobs)
-- and a two-sided one for a few rows (the index on the time).

-- name: metrics_executions_recent
-- Executions finished in the last 5 minutes per queue, type, outcome and error code, and
-- of those in the last minute (the failure-storm alert's window: a steady outage fills it
-- within a minute, where the healthy runs from before it still fill 5).
SELECT queue, type, outcome, coalesce(error_code, '') AS error_code, count(*) AS executions,
       count(*) FILTER (WHERE finished_at > now() - interval '1 minute') AS last_minute
FROM job_executions
WHERE finished_at > now() - interval '5 minutes' AND finished_at < now() + interval '1 day'
  AND outcome IS NOT NULL
GROUP BY queue, type, outcome, coalesce(error_code, '');

-- name: metrics_duration_histogram
-- Processing time of executions finished in the last 5 minutes, per type, in buckets:
-- `above` counts the bounds >= the duration (width_bucket over the negated, ascending
-- bounds), so the smallest bound holding the value is bounds[n - above].
SELECT type,
       width_bucket(-duration_ms / 1000.0, %(negated_bounds)s::float8[]) AS above,
       count(*) AS executions,
       sum(duration_ms) / 1000.0 AS seconds
FROM job_executions
WHERE finished_at > now() - interval '5 minutes' AND finished_at < now() + interval '1 day'
  AND duration_ms IS NOT NULL
GROUP BY type, above;

-- name: metrics_time_to_start_histogram
-- Wait from available to started of executions started in the last 5 minutes, per type,
-- in the same bucket form as metrics_duration_histogram.
-- An execution ends after it starts, so those that started in the window finished in it
-- or still run: the history is read through its finish index (it keeps none on
-- started_at: one index entry less per execution on the hot path).
SELECT type,
       width_bucket(-extract(epoch FROM started_at - scheduled_at)::float8,
                    %(negated_bounds)s::float8[]) AS above,
       count(*) AS executions,
       sum(greatest(extract(epoch FROM started_at - scheduled_at), 0)) AS seconds
FROM job_executions_all
WHERE started_at > now() - interval '5 minutes' AND started_at < now() + interval '1 day'
  AND (finished_at > now() - interval '5 minutes' AND finished_at < now() + interval '1 day'
       OR finished_at IS NULL)
GROUP BY type, above;

-- name: metrics_event_totals
-- Recovered and zombie executions, and expired jobs, per type since counting began
-- (job_event_totals, kept in the statements that recover, refuse or expire): real
-- counters, retention never lowers them.
-- Every published type gets each event, at zero until it happens, so a counter's series
-- exists before its first increment (rate() and increase() miss a series' first value).
SELECT e.event, t.type, coalesce(x.total, 0) AS total
FROM (VALUES ('recovered'), ('zombie_outcome'), ('zombie_lease'), ('expired')) AS e(event)
CROSS JOIN (SELECT type FROM job_types UNION SELECT type FROM job_event_totals) AS t
LEFT JOIN job_event_totals x ON x.event = e.event AND x.type = t.type
ORDER BY t.type, e.event;

-- name: metrics_runnable_by_queue_type
-- Runnable pending jobs per queue and type, the oldest one's wait, and whether paused.
SELECT j.queue, j.type, count(*) AS runnable,
       extract(epoch FROM now() - min(j.available_at)) AS oldest_pending_s,
       coalesce(bool_or(qc.paused), false) AS paused
FROM background_jobs j
LEFT JOIN queue_controls qc ON qc.queue = j.queue
WHERE j.status = 'pending' AND j.available_at <= now()
GROUP BY j.queue, j.type;

-- name: metrics_stale_running
-- Running jobs per queue and type whose heartbeat is older than the stale threshold.
SELECT queue, type, count(*) AS stale
FROM background_jobs
WHERE status = 'running'
  AND (heartbeat_at IS NULL OR heartbeat_at < now() - make_interval(secs => %(stale_s)s::float8))
GROUP BY queue, type;

-- name: alerts_queue_flow
-- Per queue over the last 15 minutes: jobs that became runnable and executions started;
-- more arriving than starting, with a deep queue, is the Alerts panel's "growing". A job
-- that became runnable in the window arrived whether it still waits or an execution
-- started it since (counting only the waiting ones hid every arrival a worker took:
-- arrived - started is how much the backlog grew, tests/figures/test_metrics_and_alerts.py).
SELECT queue, sum(arrived) AS arrived, sum(started) AS started FROM (
    SELECT queue, count(*) AS arrived, 0 AS started
    FROM background_jobs
    WHERE status = 'pending' AND available_at > now() - interval '15 minutes'
      AND available_at <= now()
    GROUP BY queue
    UNION ALL
    SELECT queue, count(*) FILTER (WHERE scheduled_at > now() - interval '15 minutes'),
           count(*)
    FROM job_executions_all
    WHERE started_at > now() - interval '15 minutes' AND started_at < now() + interval '1 day'
      -- (started in the window: finished in it or running; the finish index reads it)
      AND (finished_at > now() - interval '15 minutes'
           AND finished_at < now() + interval '1 day' OR finished_at IS NULL)
    GROUP BY queue
) flow
GROUP BY queue;

-- name: alerts_completions_usual
-- Completions in the last hour, and in the same hour a day and a week ago.
SELECT count(*) FILTER (WHERE finished_at > now() - interval '1 hour') AS last_hour,
       count(*) FILTER (WHERE finished_at > now() - interval '25 hours'
                          AND finished_at <= now() - interval '24 hours') AS day_ago,
       count(*) FILTER (WHERE finished_at > now() - interval '169 hours'
                          AND finished_at <= now() - interval '168 hours') AS week_ago
FROM job_executions
WHERE outcome = 'completed'
  AND (finished_at BETWEEN now() - interval '1 hour' AND now() + interval '1 day'
       OR finished_at BETWEEN now() - interval '25 hours' AND now() - interval '24 hours'
       OR finished_at BETWEEN now() - interval '169 hours' AND now() - interval '168 hours');

-- name: metrics_xmin_horizon
-- What holds back this database's xmin horizon, one row per kind of holder: VACUUM and
-- page pruning keep every row version a holder might still see, so dead tuples pile up
-- in the job tables and the claim's index scans wade through them. Sessions count only
-- in this database (PostgreSQL 14+ ignores other databases' for our tables), the
-- console's own not at all; autovacuum's snapshot is ignored by the horizon, so here
-- too (its workers have no user: usesysid tells them apart even where backend_type is
-- hidden). A session holds it with a snapshot (backend_xmin) or a transaction id of its own
-- (backend_xid: an idle-in-transaction session that wrote). Every role sees backend_xmin
-- and backend_xid, but only its own sessions' xact_start (and backend_type) without
-- pg_monitor (pg_read_all_stats): the others count in `hidden`, and by age in
-- transactions only. Replication slots (and walsenders with hot_standby_feedback, seen
-- with pg_monitor) hold it for every database and have no start time. A slot's
-- catalog_xmin holds back only the system catalogs, not the job tables: left out.
SELECT 'session' AS holder,
       max(greatest(age(backend_xmin), age(backend_xid))) AS age_xids,
       max(extract(epoch FROM now() - xact_start)) AS age_s,
       count(*) FILTER (WHERE xact_start IS NULL) AS hidden
FROM pg_stat_activity
WHERE datid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND pid <> pg_backend_pid()
  AND usesysid IS NOT NULL AND backend_type IS DISTINCT FROM 'autovacuum worker'
  AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
UNION ALL
SELECT 'prepared_transaction', max(age(transaction)),
       extract(epoch FROM now() - min(prepared)), 0
FROM pg_prepared_xacts
WHERE database = current_database()
UNION ALL
SELECT 'replication', max(age(xmin)), NULL, 0
FROM (SELECT xmin FROM pg_replication_slots WHERE xmin IS NOT NULL
      UNION ALL
      SELECT backend_xmin FROM pg_stat_activity
      WHERE backend_type = 'walsender' AND backend_xmin IS NOT NULL) AS r;

-- name: metrics_table_tuples
-- Live and dead tuples of Jobwarden's busiest tables (the statistics collector's
-- estimates) and the age of their last vacuum, manual or automatic (NULL: never since
-- the statistics were reset). The names resolve on the search_path, as the runtime's do.
-- A partitioned table (job_executions, migration 0066) holds no tuples itself: its
-- figures are its partitions' sums, and its vacuum age the least recently vacuumed
-- partition's (pg_partition_tree lists nothing for a plain table: the table stands alone).
SELECT t.name AS table_name, sum(s.n_live_tup)::bigint AS live,
       sum(s.n_dead_tup)::bigint AS dead,
       extract(epoch FROM now() - min(greatest(s.last_vacuum, s.last_autovacuum)))
           AS vacuum_age_s
FROM unnest(ARRAY['background_jobs', 'job_executions', 'job_audit', 'processed_effects',
                  'job_count_deltas', 'job_minute_counts', 'job_timings', 'job_workers'])
         AS t(name)
JOIN pg_stat_user_tables s
  ON s.relid = to_regclass(t.name)
  OR s.relid IN (SELECT p.relid FROM pg_partition_tree(to_regclass(t.name)) AS p
                 WHERE p.isleaf)
GROUP BY t.name
ORDER BY t.name;
