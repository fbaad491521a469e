-- The operations console's read queries (console/data/queries.py is the only caller).
-- Optional filters are written `(%(x)s IS NULL OR col = %(x)s)`; the console disables
-- prepared statements, so every execution gets a custom plan with those guards folded.
-- A trailing window (of executions, of the minute rollup) has an upper bound no row
-- reaches (`< now() + interval '1 day'`), as in metrics.sql: without statistics a
-- one-sided range reads as a third of the table, a two-sided one as a few rows (the index).

-- name: console_transaction_settings
-- Planner settings for the rest of this transaction: no JIT (console/data/database.py).
SELECT set_config('jit', 'off', true) AS jit;

-- name: console_counts_by_queue_type
-- Job counts per (status, queue, type), summed from the rollup the triggers of migration
-- 0009 keep (docs/architecture.md §3): a few hundred rows whatever the number of jobs.
-- The rollup counts a running job as pending (migration 0094: a claim writes nothing), so
-- running jobs are counted in background_jobs, through its partial index of running jobs
-- (background_jobs_lease_idx; at most the fleet's slots), and taken from pending: one
-- statement, one snapshot, so the two agree. A `running` row of the rollup (left by a
-- trigger before 0094) is read as pending.
WITH running AS (
    SELECT queue, type, count(*) AS jobs
    FROM background_jobs
    WHERE status = 'running'
    GROUP BY queue, type
), rolled AS (
    SELECT jobwarden_counted_status(status) AS status,
           queue, type, sum(jobs) AS jobs
    FROM job_count_deltas
    GROUP BY 1, 2, 3
)
SELECT status, queue, type, jobs::bigint AS jobs
FROM (SELECT d.status, d.queue, d.type, d.jobs - coalesce(r.jobs, 0) AS jobs
      FROM rolled d
      LEFT JOIN running r ON d.status = 'pending' AND r.queue = d.queue AND r.type = d.type
      UNION ALL
      SELECT 'running', queue, type, jobs FROM running) c
WHERE jobs <> 0
ORDER BY status, queue, type;

-- name: console_status_totals
-- Jobs per ended status from the rollup: the navigation's badges (Failed, Needs review),
-- on every signed-in page. Never a read of background_jobs, so a page renders while that
-- table is locked (a migration, VACUUM FULL); pending and running, which the rollup does
-- not tell apart (migration 0094), are left to the overview's counts.
SELECT status, sum(jobs)::bigint AS jobs
FROM job_count_deltas
WHERE status NOT IN ('pending', 'running')
GROUP BY status;

-- name: console_pending_age
-- Runnable pending jobs and how long the oldest of them has waited (database clock).
SELECT count(*) AS runnable,
       extract(epoch FROM now() - min(available_at)) AS oldest_pending_s
FROM background_jobs
WHERE status = 'pending' AND available_at <= now();

-- name: console_last_hour_rates
-- Jobs that reached each outcome in the last hour (the per-minute rollup), the
-- executions recovered from lost workers, and the jobs that expired. A snooze puts a job off and is no outcome: it
-- is counted beside them, never in `finished` (the rates' denominator).
SELECT coalesce(sum(jobs) FILTER (WHERE outcome <> 'snoozed'), 0)::bigint AS finished,
       coalesce(sum(jobs) FILTER (WHERE outcome = 'snoozed'), 0)::bigint AS snoozed,
       coalesce(sum(jobs) FILTER (WHERE outcome = 'completed'), 0)::bigint AS completed,
       coalesce(sum(jobs) FILTER (WHERE outcome = 'retried'), 0)::bigint AS retried,
       coalesce(sum(jobs) FILTER (WHERE outcome = 'failed'), 0)::bigint AS failed,
       (SELECT count(*) FROM job_executions
        WHERE outcome = 'worker_lost' AND finished_at > now() - interval '1 hour') AS recovered,
       -- Jobs failed in the last hour because nothing started them by their deadline
       -- (migration 0081; the rollup counts them among `failed`, code EXPIRED, like any
       -- job that reached failed): a range of the failed index.
       (SELECT count(*) FROM background_jobs
        WHERE status = 'failed' AND last_error_code = 'EXPIRED'
          AND failed_at > now() - interval '1 hour'
          AND failed_at < now() + interval '1 day') AS expired
FROM job_minute_counts
WHERE minute >= date_trunc('minute', now()) - interval '59 minutes'
  AND minute < now() + interval '1 day';

-- name: console_trend
-- Jobs per outcome and time bucket over the `range_s` seconds of full minutes before the
-- current one (one queue or all, one type or all); the current, unfinished minute comes
-- as bucket -1 (the chart must not draw it as a full minute: every line would dip toward
-- 0 at "now").
-- Read one hour at a time (OFFSET 0 keeps each slice a range scan of the primary key):
-- the rollup holds 8 days, and without statistics a plain range would read all of them.
SELECT floor(extract(epoch FROM date_trunc('minute', now()) - interval '1 minute' - x.minute)
             / %(bucket_s)s::float8)::int AS bucket,
       x.outcome, sum(x.jobs)::bigint AS jobs
FROM generate_series(0, ceil(%(range_s)s::float8 / 3600)::int - 1) AS h(hour)
CROSS JOIN LATERAL (
    SELECT m.minute, m.outcome, m.jobs
    FROM job_minute_counts m
    WHERE m.minute > date_trunc('minute', now())
                     - make_interval(hours => h.hour + 1, mins => 1)
      AND m.minute <= date_trunc('minute', now())
                      - make_interval(hours => h.hour, mins => least(h.hour, 1))
      AND (%(queue)s::text IS NULL OR m.queue = %(queue)s::text)
      AND (%(type)s::text IS NULL OR m.type = %(type)s::text)
      AND m.outcome IN ('completed', 'failed', 'retried')
    OFFSET 0
) x
GROUP BY 1, 2;

-- name: console_usual_rate
-- The usual rate per outcome for this hour of the day: jobs per minute in the same hour
-- on each of the previous 7 days, over the minutes those days had any data (one queue or
-- all, one type or all).
-- One range scan per day (OFFSET 0 keeps the planner from flattening it into a join
-- that reads the whole rollup when it has no statistics).
SELECT x.outcome,
       sum(x.jobs)::float8 / (count(DISTINCT x.day) * 60) AS per_minute,
       count(DISTINCT x.day) AS days
FROM generate_series(1, 7) AS d(day)
CROSS JOIN LATERAL (
    SELECT m.outcome, m.jobs, d.day
    FROM job_minute_counts m
    WHERE m.minute > date_trunc('minute', now()) - make_interval(days => d.day, hours => 1)
      AND m.minute <= date_trunc('minute', now()) - make_interval(days => d.day)
      AND (%(queue)s::text IS NULL OR m.queue = %(queue)s::text)
      AND (%(type)s::text IS NULL OR m.type = %(type)s::text)
      AND m.outcome IN ('completed', 'failed', 'retried')
    OFFSET 0
) x
GROUP BY x.outcome;

-- name: console_stale_running
-- Running jobs whose lease expired or whose heartbeat is older than the stale threshold.
SELECT id, queue, type, worker_id, attempts,
       extract(epoch FROM now() - heartbeat_at) AS heartbeat_age_s,
       extract(epoch FROM now() - lease_expires_at) AS lease_overdue_s
FROM background_jobs
WHERE status = 'running'
  AND (lease_expires_at < now()
       OR heartbeat_at < now() - make_interval(secs => %(stale_s)s::float8))
ORDER BY heartbeat_at NULLS FIRST
LIMIT %(limit)s::int;

-- name: console_recovered_recent
-- Executions recovered from lost workers in the last hour (newest first).
SELECT e.job_id, e.attempt, e.worker_id, e.finished_at, e.type, e.queue, j.status
FROM job_executions e
JOIN background_jobs j ON j.id = e.job_id
WHERE e.finished_at > now() - interval '1 hour' AND e.outcome = 'worker_lost'
ORDER BY e.finished_at DESC
LIMIT %(limit)s::int;

-- name: console_workers_list
-- Every worker not stopped long ago, its heartbeat age, derived state and running jobs.
SELECT w.worker_id, w.host, w.pid, w.queues, w.lanes, w.job_types, w.concurrency, w.version,
       w.loop_lag_ms, w.started_at, w.heartbeat_at, w.stopped_at, w.state AS recorded_state,
       extract(epoch FROM now() - w.heartbeat_at) AS heartbeat_age_s,
       CASE
         WHEN w.state IN ('stopped', 'gone') THEN w.state
         WHEN w.heartbeat_at < now() - make_interval(secs => %(gone_s)s::float8) THEN 'gone'
         ELSE w.state
       END AS state,
       (SELECT count(*) FROM background_jobs j
        WHERE j.status = 'running' AND j.worker_id = w.worker_id) AS running_jobs
FROM job_workers w
WHERE w.state NOT IN ('stopped', 'gone')
   OR coalesce(w.stopped_at, w.heartbeat_at) > now() - interval '1 hour'
ORDER BY (w.state IN ('stopped', 'gone')), w.started_at DESC
LIMIT %(limit)s::int;

-- name: console_running_jobs_of_workers
-- The jobs each of the given workers is running now.
SELECT id, worker_id, queue, type, attempts, max_attempts, progress,
       extract(epoch FROM now() - started_at) AS running_s,
       extract(epoch FROM now() - heartbeat_at) AS heartbeat_age_s,
       cancel_requested_at
FROM background_jobs
WHERE status = 'running' AND worker_id = ANY(%(worker_ids)s::text[])
ORDER BY started_at;

-- name: console_failed_groups
-- Failed jobs grouped by error code (of one type, or all), with affected types, first/last
-- seen and a sample; the latest failures first (queries.failed_groups orders by activity).
-- Both parts read a partial index of failed jobs alone, index-only but the sample's row:
-- (last_error_code, type) for every type, (type, last_error_code, failed_at, id) of
-- migration 0040 for one (without it a type's groups read every failed job's row).
SELECT g.error_code, g.jobs, g.types, g.first_seen, g.last_seen, now() AS db_now,
       s.id AS sample_job_id, s.last_error AS sample_error
FROM (
    SELECT last_error_code AS error_code, count(*) AS jobs,
           array_agg(DISTINCT type) AS types,
           min(failed_at) AS first_seen, max(failed_at) AS last_seen
    FROM background_jobs
    WHERE status = 'failed'
      AND (%(type)s::text IS NULL OR type = %(type)s::text)
    GROUP BY last_error_code
) g
LEFT JOIN LATERAL (
    SELECT b.id, b.last_error FROM background_jobs b
    WHERE b.status = 'failed' AND b.last_error_code = g.error_code
      AND (%(type)s::text IS NULL OR b.type = %(type)s::text)
    ORDER BY b.failed_at DESC
    LIMIT 1
) s ON true
ORDER BY g.last_seen DESC NULLS LAST, g.jobs DESC, g.error_code NULLS LAST
LIMIT %(limit)s::int;

-- name: console_failed_type_codes
-- One type's failed jobs by error code (a failed group named by its type alone).
SELECT last_error_code AS error_code, count(*) AS jobs, max(failed_at) AS last_seen
FROM background_jobs
WHERE status = 'failed' AND type = %(type)s::text
GROUP BY last_error_code
ORDER BY jobs DESC, last_error_code NULLS LAST;

-- name: console_failed_group_types
-- One failed group's jobs by type.
SELECT type, count(*) AS jobs, max(failed_at) AS last_seen
FROM background_jobs
WHERE status = 'failed' AND last_error_code = %(error_code)s::text
GROUP BY type
ORDER BY jobs DESC;

-- name: console_jobs_page
-- One keyset page of jobs, newest first, matching the filters; older than before_id.
-- The page's ids are chosen first, reading only ids: a filter an index covers (a failed
-- type's jobs, by the partial index of migration 0040) is then an index-only scan, never
-- a read of every matching row to sort them. A key search, and a batch's members, order
-- by `id + 0`, which no index provides: on never-analyzed tables the planner would
-- otherwise walk the primary key backwards hoping to meet the key (or an old batch's
-- members) soon (the whole table at 10,000,000 jobs); the batch's index
-- (background_jobs_batch_idx) reads its members, and the sort keeps the page's.
-- A range of creation times is a range of ids (from_id, to_id: console/data/find.py)
-- with created_at tested inside it: the walk starts at to_id and stops at from_id.
SELECT j.id, j.queue, j.type, j.version, j.status, j.priority, j.attempts, j.max_attempts,
       j.last_error_code, j.idempotency_key, j.created_at, j.available_at, j.started_at,
       j.completed_at, j.failed_at, j.cancel_requested_at, j.worker_id
FROM (
    SELECT id FROM background_jobs
    WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
      AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
      AND (%(type)s::text IS NULL OR type = %(type)s::text)
      AND (%(error_code)s::text IS NULL OR last_error_code = %(error_code)s::text)
      AND (%(search_key)s::text IS NULL
           OR idempotency_key = %(search_key)s::text
           OR id = %(search_id)s::bigint)
      AND (%(flow_ids)s::bigint[] IS NULL OR id = ANY(%(flow_ids)s::bigint[]))
      AND (%(batch)s::bigint IS NULL OR batch_id = %(batch)s::bigint)
      AND (%(created_from)s::timestamptz IS NULL
           OR (id >= %(from_id)s::bigint AND created_at >= %(created_from)s::timestamptz))
      AND (%(created_to)s::timestamptz IS NULL
           OR (id < %(to_id)s::bigint AND created_at < %(created_to)s::timestamptz))
      AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
    ORDER BY CASE WHEN %(search_key)s::text IS NULL AND %(batch)s::bigint IS NULL THEN id
                  ELSE id + 0 END DESC
    LIMIT %(limit)s::int
) page
JOIN background_jobs j ON j.id = page.id
ORDER BY j.id DESC;

-- name: console_jobs_page_newer
-- The keyset page just newer than after_id (oldest first; the console reverses it); its
-- ids chosen first, as console_jobs_page's.
SELECT j.id, j.queue, j.type, j.version, j.status, j.priority, j.attempts, j.max_attempts,
       j.last_error_code, j.idempotency_key, j.created_at, j.available_at, j.started_at,
       j.completed_at, j.failed_at, j.cancel_requested_at, j.worker_id
FROM (
    SELECT id FROM background_jobs
    WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
      AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
      AND (%(type)s::text IS NULL OR type = %(type)s::text)
      AND (%(error_code)s::text IS NULL OR last_error_code = %(error_code)s::text)
      AND (%(search_key)s::text IS NULL
           OR idempotency_key = %(search_key)s::text
           OR id = %(search_id)s::bigint)
      AND (%(flow_ids)s::bigint[] IS NULL OR id = ANY(%(flow_ids)s::bigint[]))
      AND (%(batch)s::bigint IS NULL OR batch_id = %(batch)s::bigint)
      AND (%(created_from)s::timestamptz IS NULL
           OR (id >= %(from_id)s::bigint AND created_at >= %(created_from)s::timestamptz))
      AND (%(created_to)s::timestamptz IS NULL
           OR (id < %(to_id)s::bigint AND created_at < %(created_to)s::timestamptz))
      AND id > %(after_id)s::bigint
    ORDER BY CASE WHEN %(search_key)s::text IS NULL AND %(batch)s::bigint IS NULL THEN id
                  ELSE id + 0 END ASC
    LIMIT %(limit)s::int
) page
JOIN background_jobs j ON j.id = page.id
ORDER BY j.id ASC;

-- name: console_job_get
-- One job with its ages measured on the database clock, and its batch's description.
SELECT j.*,
       extract(epoch FROM now() - j.heartbeat_at) AS heartbeat_age_s,
       extract(epoch FROM now() - j.created_at) AS age_s,
       extract(epoch FROM j.lease_expires_at - now()) AS lease_left_s,
       (SELECT b.description FROM job_batches b WHERE b.id = j.batch_id) AS batch_description,
       -- Enqueues folded into it (migration 0081): refused by its unique key's window or
       -- live job, or debounced into it (`replaced`).
       f.folded, f.folded_replacing
FROM background_jobs j
CROSS JOIN LATERAL (
    SELECT count(*) AS folded, count(*) FILTER (WHERE replaced) AS folded_replacing
    FROM job_folds WHERE job_id = j.id) AS f
WHERE j.id = %(job_id)s::bigint;

-- name: console_job_executions
-- A job's attempts timeline, oldest first, its running attempt included (last: no id).
SELECT attempt, execution_id, worker_id, scheduled_at, started_at, heartbeat_at, finished_at,
       outcome, error_code, error, traceback, duration_ms,
       extract(epoch FROM started_at - scheduled_at) AS wait_s,
       extract(epoch FROM now() - started_at) * 1000 AS running_ms
FROM job_executions_all
WHERE job_id = %(job_id)s::bigint
ORDER BY attempt, id NULLS LAST;

-- name: console_job_execution_logs
-- The log lines of a job's attempts (job_execution_logs, migration 0087), by execution id
-- (its primary key): one row per attempt that logged; the running one has none yet.
SELECT execution_id, lines, dropped, jsonb_array_length(lines) AS kept
FROM job_execution_logs
WHERE execution_id = ANY(%(execution_ids)s::uuid[]);

-- name: console_job_audit
-- The operator actions on one job, newest first.
SELECT id, actor, role, action, reason, from_status, to_status, at, request_id, bulk_id
FROM job_audit
WHERE job_id = %(job_id)s::bigint
ORDER BY at DESC, id DESC
LIMIT 200;

-- name: console_unknown_jobs
-- Jobs whose outcome is ambiguous and need an operator's reconciliation, newest first;
-- of one group of Needs review when given (its type, its code or no code, its verdict or
-- none: each an equality or IS NULL that the custom plan keeps, for the unknown jobs'
-- index of migration 0077 to answer).
SELECT j.id, j.queue, j.type, j.attempts, j.max_attempts, j.last_error_code, j.last_error,
       j.idempotency_key, j.worker_id, j.payload, j.reconcile_verdict, j.retried_at,
       coalesce(e.finished_at, j.heartbeat_at, j.started_at) AS since
FROM (
    SELECT id FROM background_jobs
    WHERE status = 'unknown'
      AND (%(type)s::text IS NULL OR type = %(type)s::text)
      AND (%(error_code)s::text IS NULL OR last_error_code = %(error_code)s::text)
      AND (NOT %(no_code)s::boolean OR last_error_code IS NULL)
      AND (%(verdict)s::text IS NULL OR reconcile_verdict = %(verdict)s::text)
      AND (NOT %(no_verdict)s::boolean OR reconcile_verdict IS NULL)
      AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
    ORDER BY id DESC
    LIMIT %(limit)s::int
) page
JOIN background_jobs j ON j.id = page.id
LEFT JOIN LATERAL (
    SELECT finished_at FROM job_executions x
    WHERE x.job_id = j.id ORDER BY x.attempt DESC LIMIT 1
) e ON true
ORDER BY j.id DESC;

-- name: console_audit_page
-- One keyset page of the audit log, newest first, filtered by actor, action and job.
SELECT a.id, a.job_id, a.bulk_id, a.actor, a.role, a.action, a.reason,
       a.from_status, a.to_status, a.at, a.request_id, a.details->>'queue' AS queue,
       a.details->>'schedule' AS schedule, a.details->>'scope' AS limit_scope,
       a.details->>'name' AS limit_name,
       (a.details->>'despite_failed_canary')::boolean AS despite_failed_canary,
       a.details->>'failed_again' AS failed_again, a.details->>'target' AS notify_target
FROM job_audit a
WHERE (%(actor)s::text IS NULL OR a.actor = %(actor)s::text)
  AND (%(action)s::text IS NULL OR a.action = %(action)s::text)
  AND (%(job_id)s::bigint IS NULL OR a.job_id = %(job_id)s::bigint)
  AND (%(bulk_id)s::uuid IS NULL OR a.bulk_id = %(bulk_id)s::uuid)
  AND (%(before_id)s::bigint IS NULL OR a.id < %(before_id)s::bigint)
ORDER BY a.id DESC
LIMIT %(limit)s::int;

-- name: console_audit_bulk_summary
-- One bulk action at a glance: who, what, why, how many jobs it changed (its start,
-- continue and stop, rows of no job, are listed with the rest of the log, not counted here).
SELECT actor, role, action, reason, count(*) AS jobs, min(at) AS at
FROM job_audit
WHERE bulk_id = %(bulk_id)s::uuid AND job_id IS NOT NULL
GROUP BY actor, role, action, reason;

-- name: console_sla_histograms
-- Per job type over the last hour (the 5-minute period now and the 11 before it), its
-- executions' time to start ('wait') and run time ('run') by bucket of the rollup
-- (migration 0086; console/data/sla.py reads percentiles from them), and the running
-- executions' time to start, bucketed alike from their job rows (a few: one per slot).
-- Its cost is bounded by the buckets, not by the executions of the hour.
SELECT type, measure, bucket, sum(executions)::bigint AS executions,
       sum(raised)::bigint AS raised, sum(finished)::bigint AS finished
FROM (
    SELECT type, measure, bucket, executions, raised, executions AS finished
    FROM job_timings
    WHERE period >= jobwarden_timing_period(now()) - interval '55 minutes'
      AND period < now() + interval '1 day'
    UNION ALL
    SELECT type, 'wait',
           jobwarden_timing_bucket(extract(epoch FROM started_at - available_at)::float8
                                   * 1000),
           1, 0, 0
    FROM background_jobs
    WHERE status = 'running'
      AND started_at >= jobwarden_timing_period(now()) - interval '55 minutes'
      AND started_at < now() + interval '1 day'
) t
GROUP BY type, measure, bucket;

-- name: console_sla_outcomes_by_type
-- Per job type over the last hour: jobs that reached a final outcome, from the rollup.
SELECT type,
       coalesce(sum(jobs) FILTER (WHERE outcome = 'failed'), 0)::bigint AS failed,
       coalesce(sum(jobs) FILTER (WHERE outcome IN ('completed', 'failed', 'cancelled',
                                                    'skipped')), 0)::bigint AS final,
       coalesce(sum(jobs) FILTER (WHERE outcome = 'unknown'), 0)::bigint AS unknown
FROM job_minute_counts
WHERE minute >= date_trunc('minute', now()) - interval '59 minutes'
  AND minute < now() + interval '1 day'
GROUP BY type;

-- name: console_sla_wait_buckets
-- Per job type and 5-minute interval of the last hour (0: the period now), the worst time
-- to start, exactly (each bucket's largest), and how many started, from the rollup and
-- the running executions' job rows.
SELECT type, bucket, max(worst_ms) / 1000 AS worst_wait_s, sum(started)::bigint AS started
FROM (
    SELECT type,
           floor(extract(epoch FROM jobwarden_timing_period(now()) - period) / 300)::int
               AS bucket,
           max_ms AS worst_ms, executions AS started
    FROM job_timings
    WHERE measure = 'wait'
      AND period >= jobwarden_timing_period(now()) - interval '55 minutes'
      AND period < now() + interval '1 day'
    UNION ALL
    SELECT type,
           floor(extract(epoch FROM jobwarden_timing_period(now())
                                    - jobwarden_timing_period(started_at)) / 300)::int,
           extract(epoch FROM started_at - available_at)::float8 * 1000, 1
    FROM background_jobs
    WHERE status = 'running'
      AND started_at >= jobwarden_timing_period(now()) - interval '55 minutes'
      AND started_at < now() + interval '1 day'
) t
GROUP BY type, bucket;

-- name: console_sla_pending_by_type
-- Per job type: runnable pending jobs and the oldest one's wait.
SELECT type, count(*) AS pending,
       extract(epoch FROM now() - min(available_at)) AS oldest_pending_s
FROM background_jobs
WHERE status = 'pending' AND available_at <= now()
GROUP BY type;

-- name: console_job_type_slas
-- SLA targets the handlers declared (their workers publish them to job_types).
SELECT type, sla_seconds FROM job_types WHERE sla_seconds IS NOT NULL ORDER BY type;

-- name: console_user_by_name
-- A console user by login name.
SELECT id, username, password_hash, role, disabled, session_generation FROM console_users
WHERE username = %(username)s::text;

-- name: console_user_by_id
-- A console user by id (session loading).
SELECT id, username, password_hash, role, disabled, session_generation FROM console_users
WHERE id = %(user_id)s::bigint;

-- name: console_user_upsert
-- Create a user, or set an existing user's password and role (ending their sessions);
-- no row back when that would demote the last enabled admin.
INSERT INTO console_users (username, password_hash, role)
VALUES (%(username)s::text, %(password_hash)s::text, %(role)s::text)
ON CONFLICT (username) DO UPDATE
SET password_hash = EXCLUDED.password_hash, role = EXCLUDED.role, disabled = false,
    session_generation = console_users.session_generation + 1
WHERE NOT (console_users.role = 'admin' AND NOT console_users.disabled
           AND EXCLUDED.role <> 'admin'
           AND NOT EXISTS (SELECT 1 FROM console_users other
                           WHERE other.role = 'admin' AND NOT other.disabled
                             AND other.id <> console_users.id))
RETURNING id, (xmax = 0) AS created;

-- name: console_user_insert
-- Create a user; no row back when the name is taken (`jobwarden user add` never
-- overwrites: `user reset` does that, said out loud).
INSERT INTO console_users (username, password_hash, role)
VALUES (%(username)s::text, %(password_hash)s::text, %(role)s::text)
ON CONFLICT (username) DO NOTHING
RETURNING id;

-- name: console_user_reset
-- Set an existing user's password, and role when given (null keeps it); enable them and end
-- their sessions. `found` 0: no such user; `reset` 0 with `found` 1: that would demote the
-- last enabled admin.
WITH target AS (
    SELECT id, role FROM console_users WHERE username = %(username)s::text FOR UPDATE
), updated AS (
    UPDATE console_users u
    SET password_hash = %(password_hash)s::text,
        role = coalesce(%(role)s::text, u.role), disabled = false,
        session_generation = u.session_generation + 1
    FROM target t
    WHERE u.id = t.id
      AND NOT (t.role = 'admin' AND NOT u.disabled
               AND coalesce(%(role)s::text, t.role) <> 'admin'
               AND NOT EXISTS (SELECT 1 FROM console_users other
                               WHERE other.role = 'admin' AND NOT other.disabled
                                 AND other.id <> t.id))
    RETURNING u.role
)
SELECT (SELECT count(*) FROM target) AS found, (SELECT role FROM updated) AS role;

-- name: console_user_end_sessions
-- End every session of a user (sign-out): cookies of older generations stop working.
UPDATE console_users SET session_generation = session_generation + 1
WHERE id = %(user_id)s::bigint;

-- name: console_user_touch_login
-- Record a successful login (and store a rehashed password when parameters changed).
UPDATE console_users
SET last_login_at = now(), password_hash = coalesce(%(password_hash)s::text, password_hash)
WHERE id = %(user_id)s::bigint;

-- name: console_login_locks
-- Which of these sign-in subjects are locked, and for how many more seconds.
SELECT subject, extract(epoch FROM locked_until - now())::float8 AS seconds_left
FROM console_login_throttle
WHERE subject = ANY(%(subjects)s::text[]) AND locked_until > now();

-- name: console_login_attempt
-- Count a sign-in attempt against a subject before its password is checked, and lock the
-- subject once it is past its free attempts; no row back when the subject is locked
-- already (the attempt is refused, not counted). One statement under the row's lock:
-- parallel attempts are counted one after the other, so no more of them than the free
-- ones reach the password check. The lock set here lasts until the check's answer is
-- known (console_login_lock_from_now then starts its delay), at most `cap` should the
-- process die before: a check that takes longer than the delay lets no one else in.
-- The count restarts after a quiet window.
INSERT INTO console_login_throttle AS t (subject, failures, last_failure_at, locked_until)
VALUES (%(subject)s::text, 1, now(),
        CASE WHEN 1 >= %(free)s::int THEN now() + make_interval(secs => %(cap)s::float8) END)
ON CONFLICT (subject) DO UPDATE
SET (failures, last_failure_at, locked_until) = (
    SELECT n, now(),
           CASE WHEN n >= %(free)s::int THEN now() + make_interval(secs => %(cap)s::float8)
           END
    FROM (SELECT CASE WHEN t.last_failure_at
                           < now() - make_interval(secs => %(window)s::float8)
                      THEN 1 ELSE t.failures + 1 END AS n) counted)
WHERE t.locked_until IS NULL OR t.locked_until <= now()
RETURNING failures, locked_until IS NOT NULL AS locked, locked_until;

-- name: console_login_lock_from_now
-- The password of the attempt that locked this subject was wrong: the lock now runs for
-- its delay (1 s, doubling with each failure past the free ones, at most `cap`) from
-- this moment, when the answer goes back. Only while the lock is still the one the attempt
-- set (compare-and-set): a sign-in that succeeded meanwhile may have lifted it, and a lock
-- that ran out may have been replaced by a later attempt's.
UPDATE console_login_throttle
SET locked_until = clock_timestamp() + make_interval(
        secs => least(%(cap)s::float8, 2 ^ least(greatest(failures - %(free)s::int, 0), 30)))
WHERE subject = %(subject)s::text AND locked_until = %(locked_until)s::timestamptz;

-- name: console_login_refund
-- Take back an attempt that turned out to be a successful sign-in from this subject (an
-- address): it counts as no failure, and the lock it set, if any, is lifted.
UPDATE console_login_throttle
SET failures = greatest(failures - 1, 0),
    locked_until = CASE WHEN %(unlock)s::boolean THEN NULL ELSE locked_until END
WHERE subject = %(subject)s::text;

-- name: console_login_forget
-- Forget a subject's failures (after a successful sign-in).
DELETE FROM console_login_throttle WHERE subject = %(subject)s::text;

-- name: console_login_prune
-- Drop counts nobody has added to for a long time and whose lock has run out.
DELETE FROM console_login_throttle
WHERE last_failure_at < now() - make_interval(secs => %(older_than)s::float8)
  AND (locked_until IS NULL OR locked_until < now());

-- name: console_users_list
-- Every console user, for the admin page.
SELECT id, username, role, disabled, created_at, last_login_at
FROM console_users ORDER BY username;

-- name: console_user_exists
-- Whether a user of this id exists (an access change that came back empty: refused, or
-- no such user).
SELECT id FROM console_users WHERE id = %(user_id)s::bigint;

-- name: console_user_set_access
-- Change a user's role or disable/enable them (admin only); a change ends their sessions.
-- No row back when that would demote or disable the last enabled admin. The enabled
-- admins are locked first, in id order: of two admins demoting each other at once, the
-- second waits for the first, then finds its target the last one (the row the first
-- changed no longer matches once its lock is granted), and is refused.
WITH admins AS MATERIALIZED (
    SELECT id FROM console_users WHERE role = 'admin' AND NOT disabled
    ORDER BY id FOR UPDATE
)
UPDATE console_users u SET role = %(role)s::text, disabled = %(disabled)s::boolean,
    session_generation = u.session_generation
        + (u.role IS DISTINCT FROM %(role)s::text
           OR u.disabled IS DISTINCT FROM %(disabled)s::boolean)::int
WHERE u.id = %(user_id)s::bigint
  AND (NOT (u.role = 'admin' AND NOT u.disabled)
       OR %(role)s::text = 'admin' AND NOT %(disabled)s::boolean
       OR EXISTS (SELECT 1 FROM admins a WHERE a.id <> u.id))
RETURNING u.id;

-- name: console_failed_group_sparklines
-- Per error code, type, outcome (failed, retried, unknown) and minute of the last hour:
-- how often the code occurred, of one type or all (failed groups sum a code's outcomes,
-- retrying groups take a code and type's retries).
SELECT error_code, type, outcome,
       floor(extract(epoch FROM date_trunc('minute', now()) - minute) / 60)::int AS bucket,
       sum(jobs)::bigint AS jobs
FROM job_minute_counts
WHERE error_code = ANY(%(codes)s::text[]) AND error_code <> ''
  AND minute > date_trunc('minute', now()) - interval '60 minutes'
  AND outcome IN ('failed', 'retried', 'unknown')
  AND (%(type)s::text IS NULL OR type = %(type)s::text)
GROUP BY 1, 2, 3, 4;

-- name: console_retrying_groups
-- Retrying now, per error code and type: executions that failed with the code and went
-- back to pending for another attempt in the last hour (the rollup's `retried`: a retry,
-- a timeout or a lost worker with attempts left), and the jobs of that code and type
-- still waiting for, or running, that attempt. A retry storm shows here from its first
-- retry, before any job's attempts are spent (a failed group needs them spent). The jobs
-- are counted up to `cap` per group, through the (type, status) and error-code indexes.
WITH r AS (
    SELECT error_code, type, sum(jobs)::bigint AS retries,
           min(minute) AS first_minute, max(minute) AS last_minute
    FROM job_minute_counts
    WHERE minute > date_trunc('minute', now()) - interval '60 minutes'
      AND outcome = 'retried' AND error_code <> ''
      AND (%(type)s::text IS NULL OR type = %(type)s::text)
    GROUP BY error_code, type
)
SELECT r.error_code, r.type, r.retries, r.first_minute, r.last_minute,
       w.jobs, w.running, w.next_attempt_at, w.next_queue,
       extract(epoch FROM now() - w.next_attempt_at) AS overdue_s,
       w.fewest_attempts_left, w.sample_job_id,
       (SELECT b.last_error FROM background_jobs b WHERE b.id = w.sample_job_id)
           AS sample_error
FROM r
CROSS JOIN LATERAL (
    SELECT count(*) AS jobs, count(*) FILTER (WHERE x.status = 'running') AS running,
           min(x.available_at) FILTER (WHERE x.status = 'pending') AS next_attempt_at,
           (array_agg(x.queue ORDER BY x.available_at, x.id)
                FILTER (WHERE x.status = 'pending'))[1] AS next_queue,
           min(x.max_attempts - x.attempts) AS fewest_attempts_left,
           max(x.id) AS sample_job_id
    FROM (SELECT b.id, b.status, b.available_at, b.attempts, b.max_attempts, b.queue
          FROM background_jobs b
          WHERE b.status IN ('pending', 'running') AND b.type = r.type
            AND b.last_error_code = r.error_code
          LIMIT %(cap)s::int) x
) w
WHERE w.jobs > 0
ORDER BY r.last_minute DESC, w.jobs DESC, r.error_code, r.type
LIMIT %(limit)s::int;

-- name: console_group_retrying
-- How many jobs with a failed group's error code (of its type when given; for a type's
-- group, with any code) wait for or run another attempt now: pending or running with it
-- as their last error; up to `cap`. Type by type (the types with live jobs, from the
-- rollup), each through the (type, status) index of jobs that have an error code, as
-- console_retrying_groups counts: never every job of the code, failed ones included.
SELECT count(*) AS jobs
FROM (
    SELECT 1
    FROM (SELECT type FROM job_count_deltas
          WHERE status IN ('pending', 'running')
            AND (%(type)s::text IS NULL OR type = %(type)s::text)
          GROUP BY type HAVING sum(jobs) > 0) t
    CROSS JOIN LATERAL (
        SELECT 1 FROM background_jobs b
        WHERE b.type = t.type AND b.status IN ('pending', 'running')
          AND b.last_error_code IS NOT NULL
          AND (%(error_code)s::text IS NULL OR b.last_error_code = %(error_code)s::text)
        LIMIT %(cap)s::int
    ) x
    LIMIT %(cap)s::int
) y;

-- name: console_queue_waits
-- Per given queue: its jobs that started in the last 5 minutes and the median of how long
-- they had waited for it (scheduled to started): what a job due in it now can expect. A
-- queue none of whose jobs started then has no row. An execution ends after it starts:
-- the window of starts is read through the history's finish index (job_executions
-- keeps none on started_at).
SELECT queue, count(*) AS started,
       percentile_cont(0.5) WITHIN GROUP (
           ORDER BY extract(epoch FROM started_at - scheduled_at)) AS wait_s
FROM job_executions
WHERE started_at > now() - interval '5 minutes' AND started_at < now() + interval '1 day'
  AND finished_at > now() - interval '5 minutes' AND finished_at < now() + interval '1 day'
  AND queue = ANY(%(queues)s::text[])
GROUP BY queue;

-- name: console_worker_rates
-- Executions each of the given workers brought to an outcome in the last 5 minutes: not
-- those it handed back at shutdown, nor those recovered from it (recovery ended them).
SELECT worker_id, count(*) AS finished
FROM job_executions
WHERE finished_at > now() - interval '5 minutes' AND finished_at < now() + interval '1 day'
  AND worker_id = ANY(%(worker_ids)s::text[])
  AND outcome NOT IN ('handed_back', 'worker_lost')
GROUP BY worker_id;

-- name: console_schema_present
-- Whether this database has Jobwarden's tables at all: after a statement named a missing
-- table, the error page tells "never migrated" from "migrated by an older version".
SELECT to_regclass('background_jobs') IS NOT NULL AS present;

-- name: console_job_flow
-- A job's parents and dependents with their states (docs/guide/flows.md): `role` says
-- which; `holding`: a parent whose edge is not released yet (what the job waits for).
SELECT 'parent' AS role, p.id, p.type, p.status, e.run_anyway,
       e.released_at IS NULL AS holding
FROM job_dependencies e JOIN background_jobs p ON p.id = e.parent_id
WHERE e.job_id = %(job_id)s::bigint
UNION ALL
(SELECT 'dependent', d.id, d.type, d.status, e.run_anyway, e.released_at IS NULL
 FROM job_dependencies e JOIN background_jobs d ON d.id = e.job_id
 WHERE e.parent_id = %(job_id)s::bigint
 ORDER BY d.id LIMIT 200)
ORDER BY 1 DESC, 2;

-- name: schedule_addable_types
-- The published job types that have no schedule: what an admin may add one to (the
-- Schedules page's add form).
SELECT t.type FROM job_types t
WHERE NOT EXISTS (SELECT 1 FROM job_schedules s WHERE s.type = t.type)
ORDER BY t.type
LIMIT 1000;
