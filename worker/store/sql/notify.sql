-- Notifications (worker/duties/notifier.py, worker/duties/delivery.py,
-- worker/ops/notify_targets.py): what the notifier reads of the rollups on its own
-- period, its groups, the messages and their deliveries, and the console's targets.

-- name: notify_try_lock
-- One notifier pass at a time across all workers: a transaction-level advisory lock
-- (released at commit, so it holds through a transaction-pooling PgBouncer too).
SELECT pg_try_advisory_xact_lock(hashtext('jobwarden.notify')) AS locked, now() AS db_now;

-- name: failed_group_streaks
-- The console's failed groups show the start as "first seen", and a notification of
-- a new group says it started then: one definition for both.
-- Per error code, among the types its failed group lists (`types`: {code: [type, ...]},
-- the jobs failed now): when its current streak began (the first minute after the last
-- gap of more than an hour in which the code occurred in those types, failed, retried or
-- unknown), from the per-minute rollup; a retry does not reset it. `last_minute`: its
-- latest occurrence in those types. `latest_any`, `latest_type`: its latest occurrence
-- of any type (of `type` when given), which may be another type's (a code of old
-- failures retrying now elsewhere).
-- Walked back from the latest occurrence an hour at a time: each step asks the index
-- (error_code, minute) for the code's earliest occurrence from an hour before the
-- streak's start so far, and the start itself coming back is the gap. So a code costs
-- one probe per hour of its streak, not a read of every minute it occurred in (a week of
-- failures every minute in 20 codes read 100,000 rows: 150 ms at 1,000,000 jobs).
-- The index's order is the plan, and two things keep it so on tables without statistics:
-- no upper bound on the minute, and the row filter (outcome, type) as a sub-select,
-- which the planner cannot estimate; either of them written plainly makes it expect a
-- row or two, and read and sort every row of the code instead.
WITH RECURSIVE latest AS (
    SELECT c.code, a.minute AS latest_any, a.type AS latest_type,
           (SELECT m.minute FROM job_minute_counts m
            WHERE m.error_code = c.code AND m.error_code <> ''
              AND (SELECT m.outcome IN ('failed', 'retried', 'unknown')
                          AND (%(type)s::text IS NULL OR m.type = %(type)s::text)
                          AND (%(types)s::jsonb -> c.code) @> to_jsonb(m.type))
            ORDER BY m.minute DESC
            LIMIT 1) AS last_minute
    FROM unnest(%(codes)s::text[]) AS c(code)
    LEFT JOIN LATERAL (
        SELECT m.minute, m.type FROM job_minute_counts m
        WHERE m.error_code = c.code AND m.error_code <> ''
          AND (SELECT m.outcome IN ('failed', 'retried', 'unknown')
                      AND (%(type)s::text IS NULL OR m.type = %(type)s::text))
        ORDER BY m.minute DESC
        LIMIT 1
    ) a ON true
), walk AS (
    SELECT code, last_minute AS start FROM latest WHERE last_minute IS NOT NULL
    UNION ALL
    SELECT w.code, p.minute
    FROM walk w
    CROSS JOIN LATERAL (
        SELECT m.minute FROM job_minute_counts m
        WHERE m.error_code = w.code AND m.error_code <> ''
          AND m.minute >= w.start - interval '1 hour'
          AND (SELECT m.outcome IN ('failed', 'retried', 'unknown')
                      AND (%(type)s::text IS NULL OR m.type = %(type)s::text)
                      AND (%(types)s::jsonb -> w.code) @> to_jsonb(m.type))
        ORDER BY m.minute
        LIMIT 1
    ) p
    WHERE p.minute < w.start
)
SELECT l.code AS error_code, min(w.start) AS streak_start, max(w.start) AS last_minute,
       l.latest_any, l.latest_type
FROM latest l
LEFT JOIN walk w ON w.code = l.code
WHERE l.latest_any IS NOT NULL
GROUP BY l.code, l.latest_any, l.latest_type;

-- name: notify_failures_recent
-- Per type and error code: jobs that failed for good in the last hour (the rollup's
-- minutes), the types given left out; the earliest and latest minute.
SELECT type AS job_type, error_code, sum(jobs)::bigint AS jobs,
       min(minute) AS first_minute, max(minute) AS last_minute
FROM job_minute_counts
WHERE minute > date_trunc('minute', now()) - interval '1 hour'
  AND minute < now() + interval '1 day'
  AND outcome = 'failed' AND NOT type = ANY(%(ignored)s::text[])
GROUP BY type, error_code;

-- name: notify_retry_storms
-- Per type and error code, over the rollup's last 5 minutes: a retry storm (more than
-- `share` of the type's outcomes went back for another attempt with the code, at least
-- `min_retries` of them), with the first minute the code retried in the last hour.
WITH recent AS (
    SELECT type, outcome, error_code, sum(jobs)::bigint AS jobs
    FROM job_minute_counts
    WHERE minute > date_trunc('minute', now()) - interval '5 minutes'
      AND minute < now() + interval '1 day'
      AND outcome <> 'snoozed' AND NOT type = ANY(%(ignored)s::text[])
    GROUP BY type, outcome, error_code
), totals AS (
    SELECT type, sum(jobs) AS executions FROM recent GROUP BY type
)
SELECT r.type AS job_type, r.error_code, r.jobs AS retries, t.executions,
       (SELECT min(m.minute) FROM job_minute_counts m
        WHERE m.error_code = r.error_code AND m.type = r.type AND m.outcome = 'retried'
          AND m.minute > date_trunc('minute', now()) - interval '1 hour'
          AND m.minute < now() + interval '1 day') AS first_minute
FROM recent r JOIN totals t USING (type)
WHERE r.outcome = 'retried' AND r.jobs >= %(min_retries)s::bigint
  AND r.jobs > %(share)s::float8 * t.executions;

-- name: notify_occurrences_since
-- Per (type, error code, moment): how often the code ended an execution of the type
-- with `outcome` (failed, retried) from that moment's minute on, from the rollup.
SELECT g.job_type, g.error_code, coalesce(sum(m.jobs), 0)::bigint AS jobs
FROM unnest(%(types)s::text[], %(codes)s::text[], %(since)s::timestamptz[])
     AS g (job_type, error_code, since)
LEFT JOIN job_minute_counts m
       ON m.error_code = g.error_code AND m.type = g.job_type
      AND m.outcome = %(outcome)s::text AND m.minute >= date_trunc('minute', g.since)
      AND m.minute < now() + interval '1 day'
GROUP BY g.job_type, g.error_code;

-- name: notify_failed_sample
-- The error of the latest job of a type that failed for good with a code (the failed
-- jobs' index by code), for a message's sample.
SELECT last_error FROM background_jobs
WHERE status = 'failed' AND last_error_code = %(code)s::text AND type = %(type)s::text
ORDER BY failed_at DESC NULLS LAST
LIMIT 1;

-- name: notify_retrying_sample
-- The error of the latest job of a type waiting for or running another attempt after
-- failing with a code, for a retry storm's sample.
SELECT last_error FROM background_jobs
WHERE status IN ('pending', 'running') AND type = %(type)s::text
  AND last_error_code = %(code)s::text
ORDER BY id DESC
LIMIT 1;

-- name: notify_sla_declared
-- The SLA targets the handlers declared (their workers publish them to job_types).
SELECT type, sla_seconds FROM job_types WHERE sla_seconds IS NOT NULL;

-- name: notify_sla_waits
-- Per job type (of `types`, or every one when NULL): runnable pending jobs and the
-- oldest one's wait (the read of /metrics' runnable jobs, for the types with a target).
SELECT type AS job_type, count(*) AS runnable,
       extract(epoch FROM now() - min(available_at))::float8 AS oldest_s
FROM background_jobs
WHERE status = 'pending' AND available_at <= now()
  AND (%(types)s::text[] IS NULL OR type = ANY(%(types)s::text[]))
  AND NOT type = ANY(%(ignored)s::text[])
GROUP BY type;

-- name: notify_flows_held
-- Per type of waiting job: how many a parent that failed for good holds (an edge not
-- released, not run_anyway), since when the longest has been held, that job and the
-- parent holding it (its type, code and error, for the message).
WITH held AS (
    SELECT d.id, d.type, p.id AS parent_id, p.type AS parent_type,
           p.last_error_code AS parent_code, p.last_error AS parent_error,
           greatest(d.created_at, coalesce(p.failed_at, p.created_at)) AS held_since
    FROM background_jobs d
    JOIN job_dependencies e ON e.job_id = d.id AND e.released_at IS NULL AND NOT e.run_anyway
    JOIN background_jobs p ON p.id = e.parent_id AND p.status = 'failed'
    WHERE d.status = 'waiting' AND NOT d.type = ANY(%(ignored)s::text[])
), first AS (
    SELECT DISTINCT ON (type) type, id, parent_type, parent_code, parent_error, held_since
    FROM held
    ORDER BY type, held_since, id
)
SELECT f.type AS job_type, (SELECT count(DISTINCT h.id) FROM held h WHERE h.type = f.type)
           AS held,
       f.held_since, f.id AS longest_id, f.parent_type, f.parent_code, f.parent_error
FROM first f;

-- name: notify_groups
-- The notifier's open groups (its throttle's state).
SELECT kind, job_type, error_code, started_at, counted_from, last_seen_at, figure,
       sent_figure, last_sent_at, messages
FROM job_notify_groups;

-- name: notify_group_open
-- A group the notifier saw start, with the first message about it sent now.
INSERT INTO job_notify_groups AS g (kind, job_type, error_code, started_at, counted_from,
                                    last_seen_at, figure, sent_figure, last_sent_at)
VALUES (%(kind)s::text, %(job_type)s::text, %(error_code)s::text, %(started_at)s::timestamptz,
        %(counted_from)s::timestamptz, %(now)s::timestamptz, %(figure)s::bigint,
        %(figure)s::bigint, %(now)s::timestamptz)
ON CONFLICT (kind, job_type, error_code) DO NOTHING
RETURNING kind;

-- name: notify_group_seen
-- A group seen again: its figure now, and (`sent`) that a summary of it goes now. A
-- compare-and-set on the last message's time the pass read.
UPDATE job_notify_groups
SET last_seen_at = CASE WHEN %(seen)s::boolean THEN %(now)s::timestamptz ELSE last_seen_at END,
    figure = %(figure)s::bigint,
    sent_figure = CASE WHEN %(sent)s::boolean THEN %(figure)s::bigint ELSE sent_figure END,
    last_sent_at = CASE WHEN %(sent)s::boolean THEN %(now)s::timestamptz ELSE last_sent_at END,
    messages = messages + %(sent)s::boolean::int
WHERE kind = %(kind)s::text AND job_type = %(job_type)s::text
  AND error_code = %(error_code)s::text AND last_sent_at = %(last_sent_at)s::timestamptz
RETURNING kind;

-- name: notify_group_close
-- A group quiet for long enough, everything about it told: the next occurrence is new.
-- A counted group closes only once its last count was sent (a level read now is not owed).
DELETE FROM job_notify_groups
WHERE kind = %(kind)s::text AND job_type = %(job_type)s::text
  AND error_code = %(error_code)s::text AND last_seen_at = %(last_seen_at)s::timestamptz
  AND (figure = sent_figure OR NOT %(counting)s::boolean)
RETURNING kind;

-- name: notify_record
-- A message as composed, before its deliveries.
INSERT INTO job_notifications (kind, job_type, error_code, summary, message)
VALUES (%(kind)s::text, %(job_type)s::text, %(error_code)s::text, %(summary)s::boolean,
        %(message)s::jsonb)
RETURNING id;

-- name: notify_delivery_add
-- A message's delivery to one target, and the job that sends it.
INSERT INTO job_notify_deliveries (notification_id, target, job_id)
VALUES (%(notification_id)s::bigint, %(target)s::text, %(job_id)s::bigint);

-- name: notify_prune
-- Messages older than `older_than` seconds go, with their deliveries.
DELETE FROM job_notifications
WHERE created_at < now() - make_interval(secs => %(older_than)s::float8);

-- name: notify_delivery_for_send
-- A delivery and its message, locked while it is sent (a second execution of its job
-- waits, then finds it sent).
SELECT d.sent_at, n.message, n.kind
FROM job_notify_deliveries d
JOIN job_notifications n ON n.id = d.notification_id
WHERE d.notification_id = %(notification_id)s::bigint AND d.target = %(target)s::text
FOR UPDATE OF d;

-- name: notify_delivery_sent
-- A delivery made: when.
UPDATE job_notify_deliveries SET sent_at = now()
WHERE notification_id = %(notification_id)s::bigint AND target = %(target)s::text
  AND sent_at IS NULL;

-- name: notify_targets_list
-- The targets set in the console, by name.
SELECT id, name, kind, url, signing_secret, format, smtp_host, smtp_port, smtp_user,
       smtp_password, smtp_starttls, email_from, email_to, revision, created_at, created_by,
       updated_at, updated_by
FROM job_notify_targets
ORDER BY name, id;

-- name: notify_target_by_id
-- One target set in the console.
SELECT id, name, kind, url, signing_secret, format, smtp_host, smtp_port, smtp_user,
       smtp_password, smtp_starttls, email_from, email_to, revision
FROM job_notify_targets
WHERE id = %(id)s::bigint;

-- name: notify_target_add
-- A target set in the console, audited in the same statement (its name and kind: never
-- its URL, secret or password). No row when the name is taken.
WITH written AS (
    INSERT INTO job_notify_targets (name, kind, url, signing_secret, format, smtp_host,
                                    smtp_port, smtp_user, smtp_password, smtp_starttls,
                                    email_from, email_to, created_by, updated_by)
    VALUES (%(name)s::text, %(kind)s::text, %(url)s::text, %(secret)s::text,
            %(format)s::text, %(smtp_host)s::text, %(smtp_port)s::int, %(smtp_user)s::text,
            %(smtp_password)s::text, %(starttls)s::boolean, %(email_from)s::text,
            %(email_to)s::text[], %(actor)s::text, %(actor)s::text)
    ON CONFLICT (name) DO NOTHING
    RETURNING id, name, kind
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, request_id, details)
    SELECT %(actor)s::text, %(role)s::text, 'add_notify_target', %(reason)s::text,
           %(request_id)s::text,
           jsonb_build_object('target', w.name, 'target_id', w.id, 'kind', w.kind)
    FROM written w
    RETURNING id
)
SELECT id FROM written;

-- name: notify_target_edit
-- A console target changed, when it is still at the revision the admin saw; a secret
-- given as NULL keeps the stored one. Audited with the names of the fields changed (never
-- their values). No row when it moved on or is gone, or the new name is taken.
WITH before AS (
    SELECT * FROM job_notify_targets
    WHERE id = %(id)s::bigint AND revision = %(revision)s::int
    FOR UPDATE
), written AS (
    UPDATE job_notify_targets t
    SET name = %(name)s::text, url = coalesce(%(url)s::text, t.url),
        signing_secret = CASE WHEN %(clear_secret)s::boolean THEN NULL
                              ELSE coalesce(%(secret)s::text, t.signing_secret) END,
        format = %(format)s::text, smtp_host = %(smtp_host)s::text,
        smtp_port = %(smtp_port)s::int, smtp_user = %(smtp_user)s::text,
        smtp_password = CASE WHEN %(clear_secret)s::boolean THEN NULL
                             ELSE coalesce(%(smtp_password)s::text, t.smtp_password) END,
        smtp_starttls = %(starttls)s::boolean, email_from = %(email_from)s::text,
        email_to = %(email_to)s::text[], revision = t.revision + 1, updated_at = now(),
        updated_by = %(actor)s::text
    FROM before b
    WHERE t.id = b.id
      AND NOT EXISTS (SELECT 1 FROM job_notify_targets o
                      WHERE o.name = %(name)s::text AND o.id <> b.id)
    RETURNING t.*
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, request_id, details)
    SELECT %(actor)s::text, %(role)s::text, 'edit_notify_target', %(reason)s::text,
           %(request_id)s::text,
           jsonb_build_object('target', w.name, 'target_id', w.id, 'kind', w.kind,
                              'changed', to_jsonb(array_remove(ARRAY[
               CASE WHEN w.name IS DISTINCT FROM b.name THEN 'name' END,
               CASE WHEN w.url IS DISTINCT FROM b.url THEN 'url' END,
               CASE WHEN w.signing_secret IS DISTINCT FROM b.signing_secret
                    THEN 'signing secret' END,
               CASE WHEN w.format IS DISTINCT FROM b.format THEN 'format' END,
               CASE WHEN w.smtp_host IS DISTINCT FROM b.smtp_host THEN 'SMTP host' END,
               CASE WHEN w.smtp_port IS DISTINCT FROM b.smtp_port THEN 'SMTP port' END,
               CASE WHEN w.smtp_user IS DISTINCT FROM b.smtp_user THEN 'SMTP user' END,
               CASE WHEN w.smtp_password IS DISTINCT FROM b.smtp_password
                    THEN 'SMTP password' END,
               CASE WHEN w.smtp_starttls IS DISTINCT FROM b.smtp_starttls THEN 'STARTTLS' END,
               CASE WHEN w.email_from IS DISTINCT FROM b.email_from THEN 'sender' END,
               CASE WHEN w.email_to IS DISTINCT FROM b.email_to THEN 'recipients' END],
               NULL)))
    FROM written w JOIN before b USING (id)
    RETURNING id
)
SELECT id, revision FROM written;

-- name: notify_target_delete
-- A console target removed, when it is still at the revision the admin saw; audited.
-- Its messages not yet sent are not: their jobs find it gone and end.
WITH gone AS (
    DELETE FROM job_notify_targets
    WHERE id = %(id)s::bigint AND revision = %(revision)s::int
    RETURNING id, name, kind
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, request_id, details)
    SELECT %(actor)s::text, %(role)s::text, 'delete_notify_target', %(reason)s::text,
           %(request_id)s::text,
           jsonb_build_object('target', g.name, 'target_id', g.id, 'kind', g.kind)
    FROM gone g
    RETURNING id
)
SELECT id FROM gone;

-- name: notify_test_audit
-- The audit row of a test message asked of a target (its notification named).
INSERT INTO job_audit (actor, role, action, reason, request_id, details)
VALUES (%(actor)s::text, %(role)s::text, 'test_notify_target', %(reason)s::text,
        %(request_id)s::text,
        jsonb_build_object('target', %(name)s::text, 'target_key', %(target)s::text,
                           'notification_id', %(notification_id)s::bigint));

-- name: notify_audit_by_request
-- The audit row an earlier submission of the same form wrote (a double click).
SELECT id FROM job_audit
WHERE request_id = %(request_id)s::text AND action = %(action)s::text
  AND actor = %(actor)s::text
LIMIT 1;
