CREATE VIEW job_executions_all AS
SELECT e.id, e.job_id, e.execution_id, e.attempt, e.queue, e.type, e.worker_id,
       e.scheduled_at, e.started_at, e.heartbeat_at, e.finished_at, e.outcome,
       e.error_code, e.error, e.duration_ms, e.traceback
FROM job_executions e
-- Not a row opened by an older runtime's claim for an execution still running.
WHERE e.finished_at IS NOT NULL
   OR NOT EXISTS (SELECT 1 FROM background_jobs r
                  WHERE r.id = e.job_id AND r.status = 'running'
                    AND r.execution_id = e.execution_id)
UNION ALL
-- A running execution: its job row is its record until it ends (the claim left
-- the attempt's number, its worker, when it started and when the job had become
-- available; heartbeats keep heartbeat_at).
SELECT NULL::bigint, j.id, j.execution_id, j.attempts, j.queue, j.type, j.worker_id,
       j.available_at, j.started_at, j.heartbeat_at, NULL::timestamptz, NULL::text,
       NULL::text, NULL::text, NULL::float8, NULL::text
FROM background_jobs j
WHERE j.status = 'running';
