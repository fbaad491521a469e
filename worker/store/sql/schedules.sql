-- Periodic jobs: each scheduled type's next tick, advanced by compare-and-set so one job is
-- enqueued per tick (worker/duties/scheduler.py); an operator's pause, resume and extra run
-- (worker/ops/operations.py).

-- name: schedules_publish
-- Upsert the schedules a worker's handlers declare, only where that worker's policy of the
-- type is the published one (job_types, same transaction: never over a newer version).
-- A changed cron or timezone restarts from the new next tick; otherwise the row keeps its
-- next tick, its pause and its history.
INSERT INTO job_schedules AS s (type, cron, timezone, catch_up, payload, next_run_at,
                                published_by)
SELECT r.type, r.cron, r.timezone, r.catch_up, r.payload, r.next_run_at, r.published_by
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(
    type text, cron text, timezone text, catch_up boolean, payload jsonb,
    next_run_at timestamptz, published_by text)
JOIN job_types t ON t.type = r.type AND t.published_by = r.published_by
ORDER BY r.type
ON CONFLICT (type) DO UPDATE
SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, catch_up = EXCLUDED.catch_up,
    payload = EXCLUDED.payload, published_by = EXCLUDED.published_by, published_at = now(),
    next_run_at = CASE WHEN (s.cron, s.timezone) = (EXCLUDED.cron, EXCLUDED.timezone)
                       THEN s.next_run_at ELSE EXCLUDED.next_run_at END
RETURNING type;

-- name: schedules_unpublish
-- Drop the schedules of these types when this worker's policy of the type is the
-- published one and its handler no longer declares a schedule.
DELETE FROM job_schedules s
USING job_types t
WHERE s.type = ANY(%(types)s::text[]) AND t.type = s.type
  AND t.published_by = %(published_by)s::text
RETURNING s.type;

-- name: schedules_due
-- Schedules whose next tick has come, locked; SKIP LOCKED lets other workers take others.
-- `seen` are those this pass already read (run, or skipped as broken and still due).
SELECT type, cron, timezone, catch_up, payload, next_run_at
FROM job_schedules
WHERE NOT paused AND next_run_at <= %(now)s::timestamptz
  AND type <> ALL(%(seen)s::text[])
ORDER BY next_run_at
LIMIT %(limit)s::int
FOR UPDATE SKIP LOCKED;

-- name: schedule_advance
-- Move a schedule past the tick(s) just enqueued: a compare-and-set on the tick it read,
-- so a tick is enqueued once however many workers look.
UPDATE job_schedules
SET next_run_at = %(next_run_at)s::timestamptz, last_run_at = %(last_run_at)s::timestamptz,
    last_job_id = %(last_job_id)s::bigint
WHERE type = %(type)s::text AND next_run_at = %(expected)s::timestamptz
RETURNING type;

-- name: schedule_set_paused
-- Pause or resume a schedule, audited in the same statement (worker/ops/operations.py); a
-- resumed schedule starts again from its next tick after now (no burst for the ticks it
-- was paused through). A schedule whose next tick cannot be computed keeps next_run_at.
WITH changed AS (
    UPDATE job_schedules
    SET paused = %(paused)s::boolean,
        next_run_at = CASE WHEN %(paused)s::boolean THEN next_run_at
                           ELSE greatest(next_run_at, %(next_run_at)s::timestamptz) END
    WHERE type = %(type)s::text AND paused <> %(paused)s::boolean
    RETURNING type
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, from_status, to_status, request_id,
                           details)
    SELECT %(actor)s::text, %(role)s::text,
           CASE WHEN %(paused)s::boolean THEN 'pause_schedule' ELSE 'resume_schedule' END,
           %(reason)s::text,
           CASE WHEN %(paused)s::boolean THEN 'active' ELSE 'paused' END,
           CASE WHEN %(paused)s::boolean THEN 'paused' ELSE 'active' END,
           %(request_id)s::text, jsonb_build_object('schedule', type)
    FROM changed
    RETURNING id
)
SELECT count(*) AS changed FROM audit;

-- name: schedule_ran_now
-- An operator's extra run of a schedule (worker/ops/operations.py): the job just enqueued
-- in this transaction becomes the schedule's last run, audited in the same statement;
-- its next tick stays as it was.
WITH ran AS (
    UPDATE job_schedules
    SET last_run_at = now(), last_job_id = %(job_id)s::bigint
    WHERE type = %(type)s::text
    RETURNING type
)
INSERT INTO job_audit (job_id, actor, role, action, reason, from_status, to_status,
                       request_id, details)
SELECT %(job_id)s::bigint, %(actor)s::text, %(role)s::text, 'run_schedule', %(reason)s::text,
       NULL, 'pending', %(request_id)s::text, jsonb_build_object('schedule', type)
FROM ran
RETURNING id;

-- name: schedules_get
-- One schedule's row, with the database's clock (a resume's next tick is after it).
SELECT type, cron, timezone, catch_up, payload, paused, next_run_at, last_run_at, last_job_id,
       now() AS db_now
FROM job_schedules WHERE type = %(type)s::text;

-- name: schedules_list
-- Every schedule with its last job's status (the console's Schedules page, the CLI).
SELECT s.type, s.cron, s.timezone, s.catch_up, s.paused, s.next_run_at, s.last_run_at,
       s.last_job_id, j.status AS last_status, j.last_error_code AS last_error_code
FROM job_schedules s
LEFT JOIN background_jobs j ON j.id = s.last_job_id
ORDER BY s.type;
