-- Batches: a set of jobs with callbacks (worker/jobs/batches.py, docs/guide/flows.md).
-- A batch counts its members by the final state each reached, in the transaction that
-- gives a member its outcome (batch_count): under the member's row lock the member's
-- status is compared with what it was counted as (`batch_counted`), and the difference
-- is added to its batch's counts under the batch's row lock, never recounted from a
-- snapshot (two members ending at once would each read the other unfinished). A
-- callback is enqueued by the one statement that writes its moment.

-- name: batch_open
-- Open a batch and store its callbacks as enqueue resolved them (parallel arrays, one
-- element per callback: NULL arrays for none); returns its id.
WITH batch AS (
    INSERT INTO job_batches (description, owner)
    VALUES (%(description)s::text, %(owner)s::text)
    RETURNING id
), callbacks AS (
    INSERT INTO job_batch_callbacks
        (batch_id, event, queue, type, version, payload, priority, max_attempts,
         concurrency_key, policy_defaults)
    SELECT b.id, c.event, c.queue, c.type, c.version, c.payload, c.priority, c.max_attempts,
           c.concurrency_key, string_to_array(c.policy_defaults, ',')
    FROM batch b,
         ROWS FROM (unnest(%(events)s::text[]), unnest(%(queues)s::text[]),
                    unnest(%(types)s::text[]), unnest(%(versions)s::int[]),
                    jsonb_array_elements(%(payloads)s::jsonb), unnest(%(priorities)s::int[]),
                    unnest(%(max_attempts)s::int[]), unnest(%(concurrency_keys)s::text[]),
                    unnest(%(policy_defaults)s::text[]))
         AS c(event, queue, type, version, payload, priority, max_attempts, concurrency_key,
              policy_defaults)
)
SELECT id FROM batch

-- name: batch_join
-- Count `members` new members into a batch that has not completed, and lock its row
-- until the caller's transaction ends (a member's count waits for the members to
-- exist). One row: whether it was open (none: no such batch).
WITH target AS (
    SELECT id, complete_at FROM job_batches WHERE id = %(batch_id)s::bigint
    FOR NO KEY UPDATE
), joined AS (
    UPDATE job_batches b SET members = b.members + %(members)s::int
    FROM target t WHERE b.id = t.id AND t.complete_at IS NULL
)
SELECT complete_at IS NULL AS open FROM target

-- name: batch_is_open
-- Whether a batch exists and has not completed, read without a lock (a running
-- member's question: its batch cannot complete while it runs). One row, or none.
SELECT complete_at IS NULL AS open FROM job_batches WHERE id = %(batch_id)s::bigint

-- name: batch_grow
-- Count members a running member added in its business transaction, as that commits
-- with the member's outcome: after the finish statement (rows in the order every count
-- takes them: members, then batches), before the member's own count.
UPDATE job_batches SET members = members + %(members)s::int WHERE id = %(batch_id)s::bigint

-- name: batch_count
-- Fold into their batches the members among `job_ids` whose status differs from what
-- they were counted as, and close the batches `close_ids` (their openers are done
-- adding): members locked in id order (a finish already holds them), then batches in
-- id order. A callback is due the first time its condition holds: `failure` at the
-- first member that failed for good; `complete` once the batch is closed and every
-- member has reached a final state (completed, failed, cancelled, skipped: not
-- unknown); `success` once it is closed and every member completed. Each moment is
-- written from the batch's locked row, and the callback enqueued by the statement that
-- writes it, so once. Returns the callbacks enqueued: (batch id, event, job id).
WITH member AS MATERIALIZED (
    SELECT j.id, j.batch_id, j.batch_counted AS was,
           CASE WHEN j.status IN ('pending', 'waiting', 'running') THEN NULL
                ELSE j.status END AS now
    FROM background_jobs j
    WHERE j.id = ANY(%(job_ids)s::bigint[]) AND j.batch_id IS NOT NULL
    ORDER BY j.id
    FOR NO KEY UPDATE OF j
), changed AS (
    SELECT * FROM member WHERE was IS DISTINCT FROM now
), marked AS (
    UPDATE background_jobs j SET batch_counted = c.now FROM changed c WHERE j.id = c.id
), delta AS (
    SELECT batch_id, false AS closing, s.status,
           count(*) FILTER (WHERE now = s.status) - count(*) FILTER (WHERE was = s.status) AS n
    FROM changed
    CROSS JOIN (VALUES ('completed'), ('failed'), ('cancelled'), ('skipped'), ('unknown'))
         AS s(status)
    GROUP BY batch_id, s.status
    UNION ALL
    SELECT id, true, NULL, 0 FROM unnest(%(close_ids)s::bigint[]) AS id
), summed AS (
    SELECT batch_id, bool_or(closing) AS closing,
           coalesce(sum(n) FILTER (WHERE status = 'completed'), 0) AS completed,
           coalesce(sum(n) FILTER (WHERE status = 'failed'), 0) AS failed,
           coalesce(sum(n) FILTER (WHERE status = 'cancelled'), 0) AS cancelled,
           coalesce(sum(n) FILTER (WHERE status = 'skipped'), 0) AS skipped,
           coalesce(sum(n) FILTER (WHERE status = 'unknown'), 0) AS unknown
    FROM delta GROUP BY batch_id
), locked AS MATERIALIZED (
    -- The batches' rows as they are once locked (the newest committed version).
    SELECT b.* FROM job_batches b
    WHERE b.id IN (SELECT batch_id FROM summed)
    ORDER BY b.id
    FOR NO KEY UPDATE
), counted AS (
    SELECT l.id, l.owner, l.members, l.failure_at AS failure_was,
           l.complete_at AS complete_was, l.success_at AS success_was,
           l.completed + s.completed AS completed, l.failed + s.failed AS failed,
           l.cancelled + s.cancelled AS cancelled, l.skipped + s.skipped AS skipped,
           l.unknown + s.unknown AS unknown,
           coalesce(l.closed_at, CASE WHEN s.closing THEN now() END) AS closed_at
    FROM locked l JOIN summed s ON s.batch_id = l.id
), due AS (
    SELECT c.*,
           coalesce(c.failure_was, CASE WHEN c.failed > 0 THEN now() END) AS failure_at,
           coalesce(c.complete_was, CASE WHEN c.closed_at IS NOT NULL AND c.members =
                    c.completed + c.failed + c.cancelled + c.skipped THEN now() END)
               AS complete_at,
           coalesce(c.success_was, CASE WHEN c.closed_at IS NOT NULL
                                         AND c.members = c.completed THEN now() END)
               AS success_at
    FROM counted c
), updated AS (
    UPDATE job_batches b
    SET completed = d.completed, failed = d.failed, cancelled = d.cancelled,
        skipped = d.skipped, unknown = d.unknown, closed_at = d.closed_at,
        failure_at = d.failure_at, complete_at = d.complete_at, success_at = d.success_at
    FROM due d WHERE b.id = d.id
), fired AS (
    SELECT d.*, e.event FROM due d
    CROSS JOIN LATERAL (VALUES
        ('failure', d.failure_was IS NULL AND d.failure_at IS NOT NULL),
        ('complete', d.complete_was IS NULL AND d.complete_at IS NOT NULL),
        ('success', d.success_was IS NULL AND d.success_at IS NOT NULL)) AS e(event, now_due)
    WHERE e.now_due
), enqueued AS (
    -- The callback's own payload, with the batch's id, event, owner and counts under
    -- `batch` (the enqueue refused a payload that has that key).
    INSERT INTO background_jobs
        (queue, type, version, payload, priority, max_attempts, concurrency_key,
         policy_defaults)
    SELECT k.queue, k.type, k.version,
           k.payload || jsonb_build_object('batch', jsonb_build_object(
               'id', f.id, 'event', f.event, 'owner', f.owner, 'members', f.members,
               'completed', f.completed, 'failed', f.failed, 'cancelled', f.cancelled,
               'skipped', f.skipped, 'unknown', f.unknown)),
           k.priority, k.max_attempts, k.concurrency_key, k.policy_defaults
    FROM fired f JOIN job_batch_callbacks k ON k.batch_id = f.id AND k.event = f.event
    ORDER BY f.id, k.event
    RETURNING id, (payload #>> '{batch,id}')::bigint AS batch_id,
              payload #>> '{batch,event}' AS event
), linked AS (
    UPDATE job_batch_callbacks k SET job_id = e.id
    FROM enqueued e WHERE k.batch_id = e.batch_id AND k.event = e.event
)
SELECT f.id, f.event, e.id FROM fired f
LEFT JOIN enqueued e ON e.batch_id = f.id AND e.event = f.event
ORDER BY f.id, f.event

-- name: batch_uncounted
-- Members whose status differs from what they were counted as (a runtime from before
-- batches finished them, or an operator's action moved them), at most `limit`: what
-- batch_count must fold in. The condition is the partial index's
-- (background_jobs_batch_uncounted_idx), which holds only such rows.
SELECT id FROM background_jobs
WHERE batch_id IS NOT NULL
  AND batch_counted IS DISTINCT FROM (CASE WHEN status IN ('pending', 'waiting', 'running')
                                           THEN NULL ELSE status END)
ORDER BY id
LIMIT %(limit)s

-- name: batch_get
-- Batches by id (`ids`) or by owner key (`owner`, newest first), with their callbacks'
-- events and jobs.
SELECT b.id, b.description, b.owner, b.created_at, b.members, b.completed, b.failed,
       b.cancelled, b.skipped, b.unknown, b.closed_at, b.failure_at, b.complete_at,
       b.success_at,
       coalesce((SELECT jsonb_object_agg(k.event, k.job_id) FROM job_batch_callbacks k
                 WHERE k.batch_id = b.id), '{}'::jsonb) AS callbacks
FROM job_batches b
WHERE b.id = ANY(%(ids)s::bigint[])
   OR (%(owner)s::text IS NOT NULL AND b.owner = %(owner)s::text)
ORDER BY b.id DESC
