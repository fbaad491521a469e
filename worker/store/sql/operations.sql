-- Operator actions (retry, cancel, skip, reconcile), used by worker/ops/operations.py.
--
-- Each action is one statement (a retry: one that locks, then one that acts): lock the
-- jobs still in an allowed state, change them (compare-and-set) and append one job_audit
-- row per job, so the state change and its audit commit together or not at all. A job whose state moved meanwhile (a worker
-- finished it, another operator acted first) is simply not selected: zero rows.
--
-- Selection is one job (job_id), a set of jobs an operator reviewed (job_ids), or a failed group (error_code, optional job_type,
-- failed no later than seen_until: jobs failing after the operator's preview are left
-- alone). Custom plans fold the `IS NULL OR` guards away, so each form uses its index.

-- name: operator_jobs_lock_for_retry
-- The jobs a retry may move, locked in id order (operator_jobs_retry then moves them).
-- A statement of its own: once it returns, every release that reached one of them
-- (finish_executions, release_dependents: each locks its dependents, whatever their
-- status) has committed, so the retry, in a snapshot taken after, counts their edges
-- as committed; a release that has not reached them waits for the retry and then
-- decrements the count it wrote.
SELECT id
FROM background_jobs
WHERE status = ANY(%(from_statuses)s::text[])
  AND (%(job_id)s::bigint IS NULL OR id = %(job_id)s::bigint)
  AND (%(job_ids)s::bigint[] IS NULL OR id = ANY(%(job_ids)s::bigint[]))
  AND (%(error_code)s::text IS NULL OR last_error_code = %(error_code)s::text)
  AND (%(job_type)s::text IS NULL OR type = %(job_type)s::text)
  AND (%(seen_until)s::timestamptz IS NULL OR failed_at <= %(seen_until)s::timestamptz)
  AND (%(expected_status)s::text IS NULL OR status = %(expected_status)s::text)
  -- A reviewed selection: each job only in the status it had when selected (pairs
  -- with job_ids; NULL for a selection from before migration 0071: any status the
  -- action allows), and not retried since (a retry is an operator's change, whatever
  -- status the job reached again). Uncorrelated, so one hash of the pairs.
  AND (%(selected_statuses)s::text[] IS NULL OR (id, status) IN (
        SELECT * FROM unnest(%(job_ids)s::bigint[], %(selected_statuses)s::text[])))
  AND (%(selected_at)s::timestamptz IS NULL OR retried_at IS NULL
       OR retried_at <= %(selected_at)s::timestamptz)
ORDER BY id
FOR UPDATE;

-- name: operator_jobs_retry
-- Back for a new execution the jobs operator_jobs_lock_for_retry locked (`job_ids`):
-- to pending, or to waiting when edges of theirs are not released yet (a dependent runs
-- only after every parent completed: docs/guide/flows.md), with `waiting_on` counted
-- from those edges. Skips jobs whose idempotency key a live job holds.
WITH candidates AS (
    SELECT id, status, idempotency_key
    FROM background_jobs
    WHERE id = ANY(%(job_ids)s::bigint[]) AND status = ANY(%(from_statuses)s::text[])
    FOR UPDATE
), target AS (
    -- One job per idempotency key, and none whose key a pending/running job holds:
    -- the live-key unique index would otherwise reject the whole statement.
    SELECT DISTINCT ON (coalesce(c.idempotency_key, c.id::text)) c.id, c.status
    FROM candidates c
    WHERE c.idempotency_key IS NULL
       OR NOT EXISTS (
            SELECT 1 FROM background_jobs live
            WHERE live.idempotency_key = c.idempotency_key
              AND live.status IN ('pending', 'running'))
    ORDER BY coalesce(c.idempotency_key, c.id::text), c.id DESC
), updated AS (
    UPDATE background_jobs j SET
        status = CASE WHEN e.held > 0 THEN 'waiting' ELSE 'pending' END,
        waiting_on = e.held,
        available_at = now(),
        execution_id = NULL,
        worker_id = NULL,
        heartbeat_at = NULL,
        lease_expires_at = NULL,
        cancel_requested_at = NULL,
        failed_at = NULL,
        cancelled_at = NULL,
        -- attempts keeps counting executions; allow at least one more.
        max_attempts = greatest(j.max_attempts, j.attempts + 1),
        manual_retry_count = j.manual_retry_count + 1,
        retried_by = %(actor)s::text,
        retried_at = now(),
        -- A reconciler's verdict is of the outcome it was asked about (migration 0077).
        reconcile_verdict = NULL,
        -- An operator's retry runs the job whatever its deadline was (an expired job's
        -- would end it again at once: migration 0081).
        expires_at = NULL
    FROM target t,
         LATERAL (SELECT count(*) AS held FROM job_dependencies d
                  WHERE d.job_id = t.id AND d.released_at IS NULL) e
    WHERE j.id = t.id
    RETURNING j.id, j.queue, t.status AS from_status, j.status AS to_status, j.waiting_on
), audit AS (
    INSERT INTO job_audit
        (job_id, bulk_id, actor, role, action, reason, from_status, to_status, request_id, details)
    SELECT id, %(bulk_id)s::uuid, %(actor)s::text, %(role)s::text, %(action)s::text,
           %(reason)s::text, from_status, to_status, %(request_id)s::text, %(details)s::jsonb
    FROM updated
    RETURNING job_id
), woken AS (
    SELECT pg_notify('jobwarden_jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM updated WHERE to_status = 'pending') q
)
SELECT (SELECT count(*) FROM audit) AS jobs,
       (SELECT count(*) FROM woken) AS queues,
       (SELECT min(id) FROM updated) AS first_job_id,
       -- How many went to waiting, and (for one job) how many edges hold it.
       (SELECT count(*) FROM updated WHERE to_status = 'waiting') AS waiting,
       (SELECT max(waiting_on) FROM updated) AS waiting_on;

-- name: operator_jobs_transition
-- Move jobs to a terminal status (cancelled, skipped, completed, failed) by operator decision.
WITH target AS (
    SELECT id, status
    FROM background_jobs
    WHERE status = ANY(%(from_statuses)s::text[])
      AND (%(job_id)s::bigint IS NULL OR id = %(job_id)s::bigint)
      AND (%(job_ids)s::bigint[] IS NULL OR id = ANY(%(job_ids)s::bigint[]))
      AND (%(error_code)s::text IS NULL OR last_error_code = %(error_code)s::text)
      AND (%(job_type)s::text IS NULL OR type = %(job_type)s::text)
      AND (%(seen_until)s::timestamptz IS NULL OR failed_at <= %(seen_until)s::timestamptz)
      AND (%(expected_status)s::text IS NULL OR status = %(expected_status)s::text)
      -- A reviewed selection: each job only in the status it had when selected (pairs
      -- with job_ids; NULL for a selection from before migration 0071: any status the
      -- action allows), and not retried since (a retry is an operator's change, whatever
      -- status the job reached again). Uncorrelated, so one hash of the pairs.
      AND (%(selected_statuses)s::text[] IS NULL OR (id, status) IN (
            SELECT * FROM unnest(%(job_ids)s::bigint[], %(selected_statuses)s::text[])))
      AND (%(selected_at)s::timestamptz IS NULL OR retried_at IS NULL
           OR retried_at <= %(selected_at)s::timestamptz)
    FOR UPDATE
), updated AS (
    UPDATE background_jobs j SET
        status = %(to_status)s::text,
        cancelled_at = CASE WHEN %(to_status)s::text = 'cancelled' THEN now() ELSE j.cancelled_at END,
        skipped_at = CASE WHEN %(to_status)s::text = 'skipped' THEN now() ELSE j.skipped_at END,
        completed_at = CASE WHEN %(to_status)s::text = 'completed' THEN now() ELSE j.completed_at END,
        failed_at = CASE WHEN %(to_status)s::text = 'failed' THEN now() ELSE j.failed_at END
    FROM target t
    WHERE j.id = t.id
    RETURNING j.id, t.status AS from_status, j.status AS to_status
), audit AS (
    INSERT INTO job_audit
        (job_id, bulk_id, actor, role, action, reason, from_status, to_status, request_id, details)
    SELECT id, %(bulk_id)s::uuid, %(actor)s::text, %(role)s::text, %(action)s::text,
           %(reason)s::text, from_status, to_status, %(request_id)s::text, %(details)s::jsonb
    FROM updated
    RETURNING job_id
)
SELECT count(*) AS jobs, min(job_id) AS first_job_id FROM audit;

-- name: operator_job_request_cancel
-- Ask the worker running a job to stop (cooperative); the worker sees it on its next heartbeat.
WITH target AS (
    SELECT id, status FROM background_jobs
    WHERE id = %(job_id)s::bigint AND status = 'running' AND cancel_requested_at IS NULL
      -- Not retried since the operator looked (as operator_jobs_transition's guard).
      AND (%(selected_at)s::timestamptz IS NULL OR retried_at IS NULL
           OR retried_at <= %(selected_at)s::timestamptz)
    FOR UPDATE
), updated AS (
    UPDATE background_jobs j SET cancel_requested_at = now()
    FROM target t WHERE j.id = t.id
    RETURNING j.id, t.status AS from_status, j.status AS to_status
), audit AS (
    INSERT INTO job_audit
        (job_id, actor, role, action, reason, from_status, to_status, request_id, details)
    SELECT id, %(actor)s::text, %(role)s::text, 'request_cancel', %(reason)s::text,
           from_status, to_status, %(request_id)s::text, '{"cooperative": true}'::jsonb
    FROM updated
    RETURNING job_id
)
SELECT count(*) AS jobs, min(job_id) AS first_job_id FROM audit;

-- name: operator_audit_by_request
-- The audit row an earlier submission of the same form wrote (double-click detection):
-- the same request id for the same action, actor and target. The target is exactly one
-- of a selection (bulk_id), a job acted on alone (no bulk_id), a failed group, a queue,
-- a schedule or a live limit ('queue:<q>', 'type:<t>'); a look-up naming none matches nothing.
SELECT job_id, action, actor, at, to_status
FROM job_audit
WHERE request_id = %(request_id)s::text
  AND action = %(action)s::text
  AND actor = %(actor)s::text
  AND CASE
        WHEN %(bulk_id)s::uuid IS NOT NULL THEN bulk_id = %(bulk_id)s::uuid
        WHEN %(job_id)s::bigint IS NOT NULL THEN job_id = %(job_id)s::bigint AND bulk_id IS NULL
        WHEN %(error_code)s::text IS NOT NULL
          THEN details->>'error_code' = %(error_code)s::text
               AND details->>'job_type' IS NOT DISTINCT FROM %(job_type)s::text
        WHEN %(queue)s::text IS NOT NULL THEN details->>'queue' = %(queue)s::text
        WHEN %(schedule)s::text IS NOT NULL THEN details->>'schedule' = %(schedule)s::text
        WHEN %(limit_target)s::text IS NOT NULL THEN details->>'limit' = %(limit_target)s::text
        ELSE false
      END
ORDER BY id
LIMIT 1;

-- name: operator_job_state
-- The job's current state, to explain why an action changed nothing.
SELECT j.id, j.status, j.cancel_requested_at, j.idempotency_key, j.retried_at, j.retried_by,
       (SELECT live.id FROM background_jobs live
        WHERE j.idempotency_key IS NOT NULL
          AND live.idempotency_key = j.idempotency_key
          AND live.status IN ('pending', 'running')
          AND live.id <> j.id
        LIMIT 1) AS live_holder_id
FROM background_jobs j
WHERE j.id = %(job_id)s::bigint;

-- name: operator_group_preview
-- How many failed jobs a bulk action on an error code (and optional type) would touch.
SELECT count(*) AS jobs,
       max(failed_at) AS seen_until,
       coalesce(array_agg(DISTINCT type) FILTER (WHERE type IS NOT NULL), '{}') AS types
FROM background_jobs
WHERE status = 'failed'
  AND last_error_code = %(error_code)s::text
  AND (%(job_type)s::text IS NULL OR type = %(job_type)s::text);

-- name: operator_queue_set_paused
-- Pause or resume a queue (workers stop or start claiming its jobs), audited in the same
-- statement; a queue already in that state is left alone and nothing is audited.
-- Only a known queue is acted on (one a job, a published job type, a worker's queues or an
-- earlier control names; with `new`, any name): a typo must not pass for a paused queue.
-- Resuming only lifts a pause and never adds a row, so it cannot put a name in `queue list`.
-- Whether a job names it comes from the rollup (a few hundred rows whatever the number
-- of jobs; no index on background_jobs leads with the queue).
WITH known AS (
    SELECT %(new)s::boolean
        OR EXISTS (SELECT 1 FROM job_count_deltas WHERE queue = %(queue)s::text
                   GROUP BY status, type HAVING sum(jobs) <> 0)
        OR EXISTS (SELECT 1 FROM job_types WHERE queue = %(queue)s::text)
        OR EXISTS (SELECT 1 FROM job_workers WHERE %(queue)s::text = ANY(queues))
        OR EXISTS (SELECT 1 FROM queue_controls WHERE queue = %(queue)s::text) AS known
), paused AS (
    INSERT INTO queue_controls AS qc (queue, paused, changed_by, changed_at)
    SELECT %(queue)s::text, true, %(actor)s::text, now()
    FROM known WHERE known AND %(paused)s::boolean
    ON CONFLICT (queue) DO UPDATE
        SET paused = true, changed_by = EXCLUDED.changed_by, changed_at = now()
        WHERE NOT qc.paused
    RETURNING queue
), resumed AS (
    UPDATE queue_controls SET paused = false, changed_by = %(actor)s::text, changed_at = now()
    WHERE queue = %(queue)s::text AND paused AND NOT %(paused)s::boolean
    RETURNING queue
), effective AS (
    SELECT queue FROM paused UNION ALL SELECT queue FROM resumed
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, from_status, to_status, request_id,
                           details)
    SELECT %(actor)s::text, %(role)s::text, %(action)s::text, %(reason)s::text,
           CASE WHEN %(paused)s::boolean THEN 'active' ELSE 'paused' END,
           CASE WHEN %(paused)s::boolean THEN 'paused' ELSE 'active' END,
           %(request_id)s::text, jsonb_build_object('queue', queue)
    FROM effective
    RETURNING id
), woken AS (
    SELECT pg_notify('jobwarden_jobs', queue) FROM resumed
)
SELECT (SELECT count(*) FROM audit) AS changed, (SELECT count(*) FROM woken) AS woken,
       (SELECT known FROM known) AS known;

-- name: queue_known
-- Whether a queue is one the database knows, as operator_queue_set_paused judges it (a
-- job, a published job type, a worker's queues or a queue control names it), or one a
-- live limit names: a live limit on any other queue is refused as a typo (set_limit).
SELECT EXISTS (SELECT 1 FROM job_count_deltas WHERE queue = %(queue)s::text
               GROUP BY status, type HAVING sum(jobs) <> 0)
    OR EXISTS (SELECT 1 FROM job_types WHERE queue = %(queue)s::text)
    OR EXISTS (SELECT 1 FROM job_workers WHERE %(queue)s::text = ANY(queues))
    OR EXISTS (SELECT 1 FROM queue_controls WHERE queue = %(queue)s::text)
    OR EXISTS (SELECT 1 FROM job_limit_controls
               WHERE scope = 'queue' AND name = %(queue)s::text);

-- name: type_known
-- Whether a job type is one the database knows (a job of it, by the count rollup; a
-- published job type; a live limit): a live limit on any other type is refused as a
-- typo (set_limit), as one on an unknown queue is.
SELECT EXISTS (SELECT 1 FROM job_count_deltas WHERE type = %(type)s::text
               GROUP BY status, queue HAVING sum(jobs) <> 0)
    OR EXISTS (SELECT 1 FROM job_types WHERE type = %(type)s::text)
    OR EXISTS (SELECT 1 FROM job_limit_controls
               WHERE scope = 'type' AND name = %(type)s::text);

-- name: queues_known
-- Every queue a job, a published job type, a worker or a queue control names (for
-- `queue pause --all` after a restore). DISTINCT over background_jobs reads every job:
-- it is exact whatever the rollups say, and rare.
SELECT queue FROM (
    SELECT DISTINCT queue FROM background_jobs
    UNION SELECT queue FROM job_types
    UNION SELECT unnest(queues) FROM job_workers
    UNION SELECT queue FROM queue_controls
) q
WHERE queue <> '*'
ORDER BY queue;

-- name: queue_controls_list
-- Every queue that was ever paused or resumed, with who did it last.
SELECT queue, paused, changed_by, changed_at FROM queue_controls ORDER BY queue;

-- name: retention_try_lock
-- Only one retention pass at a time across all workers: a transaction-level advisory lock
-- (released at commit, so it holds through a transaction-pooling PgBouncer too).
SELECT pg_try_advisory_xact_lock(hashtext('jobwarden.retention')) AS locked;

-- name: retention_delete_batch
-- One batch of retention: the oldest finished jobs of one status past its age (by
-- background_jobs_retention_idx), with their done ledger entries (and their history from
-- before migration 0066; the rest goes with its week); their audit rows stay (job_id set NULL). SKIP LOCKED: a row an
-- operator action holds is left for the next pass. A job's age runs from the moment it
-- reached its current status (jobwarden_finished_at, migration 0017): a failure skipped
-- today is one day old, however long ago it failed. A parent stays while a dependent of
-- it has not ended (docs/guide/flows.md): a held dependent keeps what holds it, and a
-- dependent that runs later finds its parents' results; an ordinary job (no
-- dependents) reads nothing more. Its edges go with it (ON DELETE CASCADE).
WITH victims AS (
    SELECT id FROM background_jobs j
    WHERE status = %(status)s::text
      AND jobwarden_finished_at(status, completed_at, failed_at, cancelled_at, skipped_at,
                                created_at)
          < now() - make_interval(secs => %(older_than)s::float8)
      AND (dependents = 0 OR NOT EXISTS (
               SELECT 1 FROM job_dependencies e JOIN background_jobs d ON d.id = e.job_id
               WHERE e.parent_id = j.id
                 AND d.status IN ('pending', 'waiting', 'running', 'unknown')))
    ORDER BY status, jobwarden_finished_at(status, completed_at, failed_at, cancelled_at,
                                           skipped_at, created_at), id
    LIMIT %(batch)s::int
    FOR UPDATE SKIP LOCKED
), effects AS (
    DELETE FROM processed_effects e USING victims v
    WHERE e.job_id = v.id AND e.state = 'done'
    RETURNING e.key
), executions AS (
    -- No foreign key cascades (migration 0065). The history in weeks goes a week at a
    -- time (drop_execution_partitions, migration 0066); only the default partition's
    -- rows, the history from before the partitioning, go with their job, here.
    DELETE FROM job_executions_before e USING victims v
    WHERE e.job_id = v.id
), gone AS (
    DELETE FROM background_jobs j USING victims v
    WHERE j.id = v.id
    RETURNING j.id
)
SELECT (SELECT count(*) FROM gone) AS jobs, (SELECT count(*) FROM effects) AS effects;

-- name: retention_delete_job_batches
-- Retention's round for batches (job_batches): at most `batch` of those that ended
-- longer ago than `older_than` (completed, else closed, else opened: by
-- job_batches_ended_idx, migration 0075), with every member counted as ended, none of
-- their members left and no callback job still unfinished, oldest first, with their
-- callbacks (ON DELETE CASCADE). Never
-- one a member or a callback job may still change: a member runs, or may be retried,
-- only while it exists, and a callback comes only from a member's count. SKIP LOCKED,
-- and the counts compared on the row as locked: a batch an enqueue is joining (its row
-- locked, or just committed with a new member) is left for the next pass.
WITH victims AS (
    SELECT b.id FROM job_batches b
    WHERE coalesce(b.complete_at, b.closed_at, b.created_at)
          < now() - make_interval(secs => %(older_than)s::float8)
      AND b.members = b.completed + b.failed + b.cancelled + b.skipped + b.unknown
      AND NOT EXISTS (SELECT 1 FROM background_jobs m WHERE m.batch_id = b.id)
      AND NOT EXISTS (SELECT 1 FROM job_batch_callbacks k
                      JOIN background_jobs c ON c.id = k.job_id
                      WHERE k.batch_id = b.id
                        AND c.status IN ('pending', 'waiting', 'running', 'unknown'))
    ORDER BY coalesce(b.complete_at, b.closed_at, b.created_at), b.id
    LIMIT %(batch)s::int
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM job_batches b USING victims v WHERE b.id = v.id
    RETURNING b.id
)
SELECT count(*) AS batches FROM gone;

-- name: retention_count
-- How many jobs of each status retention_delete_batch would take, by the same age rule
-- and the same parents kept (for `jobwarden prune` to show before it asks).
SELECT status, count(*) AS jobs FROM background_jobs j
WHERE status = ANY(%(statuses)s::text[])
  AND jobwarden_finished_at(status, completed_at, failed_at, cancelled_at, skipped_at,
                            created_at)
      < now() - make_interval(secs => %(older_than)s::float8)
  AND (dependents = 0 OR NOT EXISTS (
           SELECT 1 FROM job_dependencies e JOIN background_jobs d ON d.id = e.job_id
           WHERE e.parent_id = j.id
             AND d.status IN ('pending', 'waiting', 'running', 'unknown')))
GROUP BY status;

-- name: reconcile_candidates
-- Unknown-outcome jobs of the given types (those with a reconciler), oldest first, or the
-- one job asked for. The payload as text, which reconcile() reads as the worker's claims
-- do (jobstore.read_jsonb): a payload Python cannot read, written by any client, is one
-- job's problem, not the whole pass's, whatever connection the caller reads with.
SELECT id, type, queue, payload::text AS payload, idempotency_key, attempts, last_error_code,
       last_error
FROM background_jobs
WHERE status = 'unknown' AND type = ANY(%(types)s::text[])
  AND (%(job_id)s::bigint IS NULL OR id = %(job_id)s::bigint)
ORDER BY id
LIMIT %(limit)s::int;

-- name: reconcile_requested
-- An operator asked for the reconcilers (the console's Run reconcilers): who, why and
-- the jobwarden.reconcile job that runs them, written when asked, one row per request
-- (a request folded into the operator's pending job is recorded too).
INSERT INTO job_audit (job_id, actor, role, action, reason, request_id)
VALUES (%(job_id)s::bigint, %(actor)s::text, %(role)s::text, 'request_reconcile',
        %(reason)s::text, %(request_id)s::text)
RETURNING id;

-- name: reconcile_verdict_record
-- A reconciler could not settle an unknown job: it could not tell ('unknown') or it failed
-- ('error'). The job stays for a person; its row keeps the verdict (Needs review groups
-- by it), and a change of verdict is audited, once: a reconciler asked again and again
-- with the same answer writes nothing more. Compare-and-set: a job no longer unknown (an
-- operator decided meanwhile) is left alone.
WITH job AS (
    UPDATE background_jobs SET reconcile_verdict = %(verdict)s::text
    WHERE id = %(job_id)s::bigint AND status = 'unknown'
      AND reconcile_verdict IS DISTINCT FROM %(verdict)s::text
    RETURNING id
)
INSERT INTO job_audit (job_id, actor, role, action, reason, from_status, to_status, details)
SELECT id, %(actor)s::text, %(role)s::text, 'reconcile', %(reason)s::text, 'unknown',
       'unknown', jsonb_build_object('verdict', %(verdict)s::text)
FROM job
RETURNING job_id;

-- name: operator_job_reschedule
-- Move a pending job's available_at (run now, or at the operator's time), audited in the
-- same statement; a job that left pending meanwhile is not selected, nor one asked to move
-- outside the window from now - earliest to now + latest (by the database's clock).
WITH bounds AS (
    SELECT %(run_at)s::timestamptz IS NULL
           OR %(run_at)s::timestamptz BETWEEN now() - %(earliest)s::interval
                                          AND now() + %(latest)s::interval AS in_window
), target AS (
    SELECT id, status, available_at FROM background_jobs
    WHERE id = %(job_id)s::bigint AND status = 'pending' AND (SELECT in_window FROM bounds)
    FOR UPDATE
), updated AS (
    UPDATE background_jobs j SET available_at = coalesce(%(run_at)s::timestamptz, now())
    FROM target t WHERE j.id = t.id
    RETURNING j.id, j.queue, t.status AS from_status, j.status AS to_status,
              t.available_at AS was_at, j.available_at AS new_at
), audit AS (
    INSERT INTO job_audit
        (job_id, actor, role, action, reason, from_status, to_status, request_id, details)
    SELECT id, %(actor)s::text, %(role)s::text, %(action)s::text, %(reason)s::text,
           from_status, to_status, %(request_id)s::text,
           jsonb_build_object('available_at_was', was_at, 'available_at', new_at)
    FROM updated
    RETURNING job_id
), woken AS (
    SELECT pg_notify('jobwarden_jobs', queue) FROM updated
)
SELECT (SELECT count(*) FROM audit) AS jobs, (SELECT count(*) FROM woken) AS queues,
       (SELECT in_window FROM bounds) AS in_window;

-- name: ensure_execution_partitions
-- Create the weekly partitions of job_executions from this week until `days` ahead
-- (migration 0066); returns those it created. Workers keep weeks ready ahead: a history
-- row whose week has no partition could not be written.
SELECT name
FROM jobwarden_ensure_execution_partitions(make_interval(days => %(days)s::int)) AS name;

-- name: drop_execution_partitions
-- Retention of the history: drop every partition of job_executions whose rows all
-- finished more than `older_than` seconds ago and that holds no execution of a job still
-- in background_jobs (migration 0071); returns their names. A DROP takes a short
-- ACCESS EXCLUSIVE lock on job_executions; the function's lock_timeout keeps it from queueing long in
-- front of the history's writes (the next pass tries again).
SELECT name
FROM jobwarden_drop_execution_partitions(make_interval(secs => %(older_than)s::float8)) AS name;

-- name: drop_execution_logs
-- Retention of the attempts' log lines: those of executions no longer in job_executions
-- (their week was dropped, or their job deleted with the history from before migration
-- 0066), among those older than `older_than` seconds (the history's age: no younger
-- execution is gone). Returns how many. The execution finished when its lines were
-- written (the same transaction's now()): its finished_at narrows the lookup to its week.
WITH gone AS (
    DELETE FROM job_execution_logs l
    WHERE l.finished_at < now() - make_interval(secs => %(older_than)s::float8)
      -- A probe of its job's executions per line (job_executions_job_idx; the history
      -- indexes no finished execution's id, migration 0093). As a scalar sub-select:
      -- written as NOT EXISTS it becomes an anti join that hashes the whole history.
      AND NOT (SELECT EXISTS (SELECT 1 FROM job_executions e
                              WHERE e.job_id = l.job_id AND e.execution_id = l.execution_id
                                AND e.finished_at = l.finished_at))
    RETURNING 1
)
SELECT count(*) FROM gone;
