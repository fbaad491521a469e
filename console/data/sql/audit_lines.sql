-- The audit log, one line per operator action (job_audit_lines, migration 0078): a bulk
-- action is one line counting the jobs its chunks changed, whatever their number.

-- name: console_audit_lines_page
-- One keyset page of lines, newest first, filtered by actor, action and the moment the
-- action started ([since, until)). The line's first audit row says what a single action
-- was done to (a job, a queue, a schedule, a limit) and which bulk action a stop stopped.
-- Lines are one per action, not per job: a page reads at most the lines newer than its
-- range (the at index for a narrow range, the id order otherwise), never the rows of a
-- bulk action.
SELECT l.id, l.bulk_id, l.at, l.last_at, l.actor, l.role, l.action, l.reason, l.jobs,
       a.job_id, a.bulk_id AS row_bulk_id, a.details->>'queue' AS queue,
       a.details->>'schedule' AS schedule, a.details->>'scope' AS limit_scope,
       a.details->>'name' AS limit_name, a.details->>'bulk_action' AS stopped_action
FROM job_audit_lines l
LEFT JOIN job_audit a ON a.id = l.id
WHERE (%(actor)s::text IS NULL OR l.actor = %(actor)s::text)
  AND (%(action)s::text IS NULL OR l.action = %(action)s::text)
  AND (%(since)s::timestamptz IS NULL OR l.at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR l.at < %(until)s::timestamptz)
  AND (%(before_id)s::bigint IS NULL OR l.id < %(before_id)s::bigint)
ORDER BY l.id DESC
LIMIT %(limit)s::int;
