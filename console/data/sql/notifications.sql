-- The notifications page (console/views/notifications.py): each target's deliveries of
-- the messages kept (30 days, worker/duties/notifier.py), and the latest messages.

-- name: console_notify_target_figures
-- Per target key: messages sent to it, the latest sent, those waiting to be sent (their
-- job pending or running: a receiver down shows here), those given up (their job failed
-- for good), and the attempts that failed (the sending jobs' executions that raised or
-- timed out) with the latest one's time.
SELECT d.target,
       count(*) FILTER (WHERE d.sent_at IS NOT NULL) AS sent,
       max(d.sent_at) AS last_sent_at,
       count(*) FILTER (WHERE d.sent_at IS NULL AND j.status IN ('pending', 'running'))
           AS waiting,
       count(*) FILTER (WHERE d.sent_at IS NULL AND j.status = 'failed') AS given_up,
       coalesce(sum(f.failures), 0)::bigint AS failed_attempts,
       max(f.last_failure_at) AS last_failure_at
FROM job_notify_deliveries d
LEFT JOIN background_jobs j ON j.id = d.job_id
LEFT JOIN LATERAL (
    SELECT count(*) AS failures, max(e.finished_at) AS last_failure_at
    FROM job_executions e
    WHERE e.job_id = d.job_id AND e.outcome IN ('retry', 'failed', 'timeout')
) f ON true
GROUP BY d.target;

-- name: console_notify_last_errors
-- Per target key: the error of its latest failed attempt (redacted when written, and
-- again when shown).
SELECT DISTINCT ON (d.target) d.target, e.finished_at, e.error_code, e.error
FROM job_notify_deliveries d
JOIN job_executions e ON e.job_id = d.job_id
WHERE e.outcome IN ('retry', 'failed', 'timeout')
ORDER BY d.target, e.finished_at DESC;

-- name: console_notify_recent
-- The latest messages, newest first, each with its deliveries: the target, whether it
-- was sent and the state of the job that sends it.
SELECT n.id, n.kind, n.summary, n.created_at, n.message->>'title' AS title,
       n.message->>'url' AS url,
       coalesce(jsonb_agg(jsonb_build_object(
                    'target', d.target, 'sent_at', d.sent_at, 'job_id', d.job_id,
                    'job_status', j.status) ORDER BY d.target)
                FILTER (WHERE d.target IS NOT NULL), '[]'::jsonb) AS deliveries
FROM (SELECT * FROM job_notifications ORDER BY id DESC LIMIT %(limit)s::int) n
LEFT JOIN job_notify_deliveries d ON d.notification_id = n.id
LEFT JOIN background_jobs j ON j.id = d.job_id
GROUP BY n.id, n.kind, n.summary, n.created_at, n.message
ORDER BY n.id DESC;
