-- Execution history: its weekly partitions, and the view that adds running executions.

-- The partitions of job_executions, each with the week it holds (the default has none).
CREATE OR REPLACE FUNCTION jobwarden_execution_partitions()
RETURNS TABLE (name text, week_start timestamptz, week_end timestamptz, is_default bool)
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
           CASE WHEN c.relname ~ '^job_executions_w[0-9]{8}$'
                THEN to_timestamp(substr(c.relname, 17), 'YYYYMMDD') END,
           CASE WHEN c.relname ~ '^job_executions_w[0-9]{8}$'
                THEN to_timestamp(substr(c.relname, 17), 'YYYYMMDD') + interval '7 days' END,
           pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT'
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'job_executions'::regclass
    ORDER BY 2 NULLS FIRST
$$;

-- Create the weekly partitions from this week (or the first week after the default's
-- rows, if later) until `ahead` from now; returns the partitions it created. Weeks are
-- UTC weeks, Monday to Monday; the names say their Monday (job_executions_w20261207).
CREATE OR REPLACE FUNCTION jobwarden_ensure_execution_partitions(ahead interval)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    week timestamptz := date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    first_week timestamptz;
    part text;
BEGIN
    -- CREATE ... PARTITION OF locks job_executions: never queue long before its writes.
    PERFORM set_config('lock_timeout', '2s', true);
    -- Workers all try: one at a time, the others then find the weeks made.
    PERFORM pg_advisory_xact_lock(hashtext('jobwarden.partitions'));
    -- A week before the first partition ever made is the default's: making a partition
    -- for it would have to scan the default (and could meet its rows).
    SELECT min(week_start) INTO first_week FROM jobwarden_execution_partitions();
    IF first_week IS NOT NULL AND first_week > week THEN
        week := first_week;
    END IF;
    WHILE week < now() + ahead LOOP
        part := 'job_executions_w' || to_char(week AT TIME ZONE 'UTC', 'YYYYMMDD');
        IF to_regclass(part) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF job_executions '
                           'FOR VALUES FROM (%L) TO (%L)', part, week,
                           week + interval '7 days');
            RETURN NEXT part;
        END IF;
        week := week + interval '7 days';
    END LOOP;
END $$;

-- Drop every week whose rows all finished more than `keep` ago (its end is past the age:
-- not its start, or rows up to seven days younger would go), unless a job still in
-- background_jobs has an execution in it (migration 0071: a job retention keeps keeps all
-- its attempts; pending, running and unknown jobs are kept that way too). Returns the
-- names dropped. The default partition is never dropped: it is the table from before the
-- partitioning, whose rows retention deletes with their jobs, and the place for rows no
-- week holds. A DROP takes a short ACCESS EXCLUSIVE lock on job_executions: a lock_timeout
-- keeps it from queueing long in front of the history's writes (the caller tries again
-- next pass).
CREATE OR REPLACE FUNCTION jobwarden_drop_execution_partitions(keep interval)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    p record;
    lo bigint;
    hi bigint;
    kept bool;
BEGIN
    PERFORM set_config('lock_timeout', '2s', true);
    PERFORM pg_advisory_xact_lock(hashtext('jobwarden.partitions'));
    FOR p IN SELECT * FROM jobwarden_execution_partitions()
             WHERE NOT is_default AND week_end <= now() - keep LOOP
        -- The week's job ids, from both ends of its job index.
        EXECUTE format('SELECT min(job_id), max(job_id) FROM %I', p.name) INTO lo, hi;
        -- Each live job in that range probes the week's job index once; the LIMIT keeps
        -- the probe a parameterised index scan, never a hash of the whole week.
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM background_jobs j '
                       'CROSS JOIN LATERAL (SELECT 1 FROM %I e WHERE e.job_id = j.id '
                       'LIMIT 1) hit WHERE j.id BETWEEN $1 AND $2)', p.name)
            INTO kept USING lo, hi;
        IF NOT coalesce(kept, false) THEN
            EXECUTE format('DROP TABLE IF EXISTS %I', p.name);
            RETURN NEXT p.name;
        END IF;
    END LOOP;
END $$;

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
