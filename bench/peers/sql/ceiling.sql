-- The ceiling: a raw SQL loop on Jobwarden's own schema, no runtime around it.
-- Each batch is two short transactions, as a real worker needs (the claim commits before
-- any handler runs): claim up to `batch` jobs, then complete them, each row a
-- compare-and-set on (status = 'running', execution_id), writing each execution's
-- history row once, at its end, as the runtime does (migration 0061).

-- name: ceiling_claim
-- Claim up to `batch` runnable jobs in claim order (a limit the planner cannot read,
-- as in claim_jobs, so no plan sorts the backlog).
WITH picked AS (
    SELECT id FROM background_jobs
    WHERE status = 'pending' AND available_at <= now()
    ORDER BY jobwarden_claim_rank(available_at, priority), id
    LIMIT (SELECT %(batch)s::int)
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs j
SET status = 'running', execution_id = gen_random_uuid(), attempts = j.attempts + 1,
    worker_id = %(worker_id)s, started_at = now(), heartbeat_at = now(),
    lease_seconds = 30, lease_expires_at = now() + interval '30 seconds'
FROM picked p
WHERE j.id = p.id
RETURNING j.id, j.execution_id

-- name: ceiling_complete
-- Complete the batch where each execution still owns its job, and write its history row.
WITH done AS (
    UPDATE background_jobs j
    SET status = 'completed', completed_at = now(), lease_expires_at = NULL
    FROM unnest(%(ids)s::bigint[], %(execution_ids)s::uuid[]) AS x(id, execution_id)
    WHERE j.id = x.id AND j.status = 'running' AND j.execution_id = x.execution_id
    RETURNING j.id, j.execution_id, j.attempts, j.queue, j.type, j.worker_id,
              j.available_at, j.started_at, j.heartbeat_at
)
INSERT INTO job_executions
    (job_id, execution_id, attempt, queue, type, worker_id, scheduled_at, started_at,
     heartbeat_at, finished_at, outcome, duration_ms)
SELECT id, execution_id, attempts, queue, type, worker_id, available_at, started_at,
       heartbeat_at, now(), 'completed', extract(epoch FROM now() - started_at) * 1000
FROM done
