-- Periodic jobs: each scheduled type's next tick, advanced by compare-and-set so one job is
-- enqueued per tick (worker/duties/scheduler.py); an operator's pause, resume and extra run
-- (worker/ops/operations.py).

-- name: schedules_publish
-- Upsert the schedules a worker's handlers declare, only where that worker's policy of the
-- type is the published one (job_types, same transaction: never over a newer version).
-- The declaration is kept in `declared`. A row an admin edited in the console keeps its
-- cron, zone, catch-up, payload and next tick: the console edit wins until removed
-- (worker/ops/schedule_edits.py). Otherwise a changed cron or timezone restarts from the
-- new next tick, and the row keeps its next tick, its pause and its history. A changed
-- declaration moves the revision, so an admin's form opened before it is refused.
INSERT INTO job_schedules AS s (type, cron, timezone, catch_up, payload, next_run_at,
                                published_by, declared)
SELECT r.type, r.cron, r.timezone, r.catch_up, r.payload, r.next_run_at, r.published_by,
       jsonb_build_object('cron', r.cron, 'timezone', r.timezone, 'catch_up', r.catch_up,
                          'payload', r.payload)
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(
    type text, cron text, timezone text, catch_up boolean, payload jsonb,
    next_run_at timestamptz, published_by text)
JOIN job_types t ON t.type = r.type AND t.published_by = r.published_by
ORDER BY r.type
ON CONFLICT (type) DO UPDATE
SET cron = CASE WHEN s.edited_by IS NULL THEN EXCLUDED.cron ELSE s.cron END,
    timezone = CASE WHEN s.edited_by IS NULL THEN EXCLUDED.timezone ELSE s.timezone END,
    catch_up = CASE WHEN s.edited_by IS NULL THEN EXCLUDED.catch_up ELSE s.catch_up END,
    payload = CASE WHEN s.edited_by IS NULL THEN EXCLUDED.payload ELSE s.payload END,
    published_by = EXCLUDED.published_by, published_at = now(),
    next_run_at = CASE WHEN s.edited_by IS NOT NULL
                         OR (s.cron, s.timezone) = (EXCLUDED.cron, EXCLUDED.timezone)
                       THEN s.next_run_at ELSE EXCLUDED.next_run_at END,
    declared = EXCLUDED.declared,
    revision = s.revision + (s.declared IS DISTINCT FROM EXCLUDED.declared)::int
RETURNING type;

-- name: schedules_unpublish
-- Drop the schedules of these types when this worker's policy of the type is the
-- published one and its handler no longer declares a schedule. A console edit stays
-- (it becomes a schedule of the console's own): only its declaration goes.
WITH gone AS (
    DELETE FROM job_schedules s
    USING job_types t
    WHERE s.type = ANY(%(types)s::text[]) AND t.type = s.type
      AND t.published_by = %(published_by)s::text AND s.edited_by IS NULL
    RETURNING s.type
), undeclared AS (
    UPDATE job_schedules s
    SET declared = NULL, revision = s.revision + 1
    FROM job_types t
    WHERE s.type = ANY(%(types)s::text[]) AND t.type = s.type
      AND t.published_by = %(published_by)s::text AND s.edited_by IS NOT NULL
      AND s.declared IS NOT NULL
    RETURNING s.type
)
SELECT type FROM gone UNION ALL SELECT type FROM undeclared;

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
-- Every schedule with its last job's status (the console's Schedules page, the CLI), and
-- where it comes from: code (`declared`), a console edit (`edited_by`), or both.
SELECT s.type, s.cron, s.timezone, s.catch_up, s.paused, s.next_run_at, s.last_run_at,
       s.last_job_id, j.status AS last_status, j.last_error_code AS last_error_code,
       s.payload, s.declared, s.edited_by, s.edited_at, s.revision
FROM job_schedules s
LEFT JOIN background_jobs j ON j.id = s.last_job_id
ORDER BY s.type;

-- name: schedule_for_edit
-- What an admin's add, edit or removal of a schedule checks first: the database's clock
-- (the next tick is after it), whether a worker published the job type, and the
-- schedule's row if there is one (all NULL otherwise).
SELECT now() AS db_now,
       EXISTS (SELECT 1 FROM job_types t WHERE t.type = %(type)s::text) AS known,
       s.type, s.cron, s.timezone, s.catch_up, s.payload, s.declared, s.edited_by,
       s.revision
FROM (SELECT 1) AS one
LEFT JOIN job_schedules s ON s.type = %(type)s::text;

-- name: schedule_add
-- A schedule added in the console for a published job type that has none, audited in the
-- same statement. No row when the type has a schedule already or is unknown.
WITH written AS (
    INSERT INTO job_schedules (type, cron, timezone, catch_up, payload, next_run_at,
                               published_by, edited_by, edited_at)
    SELECT t.type, %(cron)s::text, %(timezone)s::text, %(catch_up)s::boolean,
           %(payload)s::jsonb, %(next_run_at)s::timestamptz, 'console', %(actor)s::text,
           now()
    FROM job_types t WHERE t.type = %(type)s::text
    ON CONFLICT (type) DO NOTHING
    RETURNING type, cron, timezone, catch_up
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, request_id, details)
    SELECT %(actor)s::text, %(role)s::text, 'add_schedule', %(reason)s::text,
           %(request_id)s::text,
           jsonb_build_object('schedule', w.type, 'cron', w.cron, 'timezone', w.timezone,
                              'catch_up', w.catch_up)
    FROM written w
    RETURNING id
)
SELECT type FROM written;

-- name: schedule_edit
-- A schedule changed in the console, when it is still at the revision the admin saw: the
-- edit wins over the code's declaration until removed. Audited with what it was and
-- the names of the fields changed. No row when it moved on or is gone.
WITH before AS (
    SELECT * FROM job_schedules
    WHERE type = %(type)s::text AND revision = %(revision)s::int
    FOR UPDATE
), written AS (
    UPDATE job_schedules s
    SET cron = %(cron)s::text, timezone = %(timezone)s::text,
        catch_up = %(catch_up)s::boolean, payload = %(payload)s::jsonb,
        next_run_at = %(next_run_at)s::timestamptz, edited_by = %(actor)s::text,
        edited_at = now(), revision = s.revision + 1
    FROM before b
    WHERE s.type = b.type
    RETURNING s.*
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, request_id, details)
    SELECT %(actor)s::text, %(role)s::text, 'edit_schedule', %(reason)s::text,
           %(request_id)s::text,
           jsonb_build_object('schedule', w.type, 'cron', w.cron, 'timezone', w.timezone,
                              'catch_up', w.catch_up,
                              'was', jsonb_build_object('cron', b.cron,
                                                        'timezone', b.timezone,
                                                        'catch_up', b.catch_up),
                              'overrides_code', b.declared IS NOT NULL,
                              'changed', to_jsonb(array_remove(ARRAY[
               CASE WHEN w.cron IS DISTINCT FROM b.cron THEN 'cron' END,
               CASE WHEN w.timezone IS DISTINCT FROM b.timezone THEN 'timezone' END,
               CASE WHEN w.catch_up IS DISTINCT FROM b.catch_up THEN 'catch_up' END,
               CASE WHEN w.payload IS DISTINCT FROM b.payload THEN 'payload' END],
               NULL)))
    FROM written w JOIN before b ON b.type = w.type
    RETURNING id
)
SELECT type FROM written;

-- name: schedule_remove
-- A console edit removed, when the schedule is still at the revision the admin saw: a
-- schedule declared in code goes back to its declaration (from `reverted_next_run_at`,
-- the declaration's next tick), one added in the console is deleted. Audited. No row
-- when it moved on, is gone, or was never edited in the console.
WITH before AS (
    SELECT * FROM job_schedules
    WHERE type = %(type)s::text AND revision = %(revision)s::int AND edited_by IS NOT NULL
    FOR UPDATE
), gone AS (
    DELETE FROM job_schedules s
    USING before b
    WHERE s.type = b.type AND b.declared IS NULL
    RETURNING s.type
), reverted AS (
    UPDATE job_schedules s
    SET cron = b.declared->>'cron', timezone = b.declared->>'timezone',
        catch_up = (b.declared->>'catch_up')::boolean, payload = b.declared->'payload',
        next_run_at = %(reverted_next_run_at)s::timestamptz, edited_by = NULL,
        edited_at = NULL, revision = s.revision + 1
    FROM before b
    WHERE s.type = b.type AND b.declared IS NOT NULL
    RETURNING s.type
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, request_id, details)
    SELECT %(actor)s::text, %(role)s::text, 'remove_schedule', %(reason)s::text,
           %(request_id)s::text,
           jsonb_build_object('schedule', b.type, 'cron', b.cron, 'timezone', b.timezone,
                              'catch_up', b.catch_up,
                              'back_to_code', b.declared IS NOT NULL)
    FROM before b
    RETURNING id
)
SELECT type, EXISTS (SELECT 1 FROM reverted) AS back_to_code FROM before;
