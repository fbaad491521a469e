-- The rollups (job_count_deltas, job_minute_counts), kept by statement-level triggers on
-- background_jobs (docs/architecture.md, "Rollups").
-- job_count_deltas counts a running job as `pending`, "not yet ended" (migration 0094):
-- a claim (pending to running) and a renewal move no count, so the trigger a claim fires
-- writes nothing. Its readers take `running` from background_jobs (the partial index of
-- running jobs: at most the fleet's slots) and subtract it from `pending`. Every writer
-- below folds the status the same way, through jobwarden_counted_status (migration 0095).
-- The hot path's trigger functions turn JIT off (migration 0067): they plan a few rows'
-- work, which compiling never pays for.

-- The status job_count_deltas counts a job under: running as pending. The one place that
-- says so (migration 0095). A SQL function, immutable, with no SET clause: the planner
-- inlines it into each statement, so it is no call per row.
CREATE OR REPLACE FUNCTION jobwarden_counted_status(status text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN status = 'running' THEN 'pending' ELSE status END
$$;

-- Fold the count deltas into one row per key, gather the last hour's past minutes of
-- the outcome rollups into shard 0 (see jobwarden_rollup_shard), and drop old minutes
-- (the timings' after two days: the SLA page reads an hour; migration 0086). The rows of
-- the current minute (period) stay in their shards: their writers may still add to them.
-- An hour, not the whole table: a range of the primary key, bounded whatever the table
-- holds. Rows a fold missed (a transaction that added to a minute after it ended; no fold
-- for an hour) stay in their shard, which every reader sums all the same.
CREATE OR REPLACE FUNCTION jobwarden_rollup_fold() RETURNS void LANGUAGE plpgsql
SET jit = off AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('jobwarden_rollup_fold')) THEN
        RETURN;
    END IF;
    -- A `running` row left by a trigger from before migration 0094 folds into pending.
    WITH gone AS (
        DELETE FROM job_count_deltas RETURNING status, queue, type, jobs
    )
    INSERT INTO job_count_deltas (status, queue, type, jobs)
    SELECT jobwarden_counted_status(status), queue, type, sum(jobs)
    FROM gone
    GROUP BY 1, 2, 3 HAVING sum(jobs) <> 0;
    WITH gone AS (
        DELETE FROM job_minute_counts
        WHERE minute >= now() - interval '1 hour'
          AND minute < date_trunc('minute', now()) - interval '1 minute'
          AND shard <> 0
        RETURNING minute, queue, type, outcome, error_code, jobs
    )
    INSERT INTO job_minute_counts AS m (minute, queue, type, outcome, error_code, jobs, shard)
    SELECT minute, queue, type, outcome, error_code, sum(jobs), 0 FROM gone
    GROUP BY 1, 2, 3, 4, 5
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (minute, queue, type, outcome, error_code, shard)
    DO UPDATE SET jobs = m.jobs + EXCLUDED.jobs;
    WITH gone AS (
        DELETE FROM job_timings
        WHERE period >= now() - interval '1 hour'
          AND period < jobwarden_timing_period(now()) - interval '5 minutes'
          AND shard <> 0
        RETURNING period, queue, type, measure, bucket, executions, raised, max_ms
    )
    INSERT INTO job_timings AS t (period, queue, type, measure, bucket, executions, raised,
                                  max_ms, shard)
    SELECT period, queue, type, measure, bucket, sum(executions), sum(raised), max(max_ms), 0
    FROM gone
    GROUP BY 1, 2, 3, 4, 5
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (period, queue, type, measure, bucket, shard)
    DO UPDATE SET executions = t.executions + EXCLUDED.executions,
                  raised = t.raised + EXCLUDED.raised,
                  max_ms = greatest(t.max_ms, EXCLUDED.max_ms);
    DELETE FROM job_minute_counts WHERE minute < now() - interval '8 days';
    DELETE FROM job_timings WHERE period < now() - interval '2 days';
END $$;

-- The shard (1-16) this transaction adds its outcomes to (job_minute_counts,
-- job_timings; migration 0092): one no other open transaction holds, so two writers of
-- outcomes (a worker's two, or a fleet's) never wait for each other's commit on a rollup
-- row, as they did when every finish of a type in a minute added to the same row. Held
-- by a transaction-level advisory lock, tried from a start of the backend's own (its
-- pid): the same shard again for the same transaction (both triggers of one finish), a
-- free one for a concurrent writer. With all 16 held, the pid's: more writers than
-- shards share rows and wait, as before. Shard 0 holds what the fold gathered (and what
-- a rebuild wrote); no writer takes it, so the fold waits for no writer.
CREATE OR REPLACE FUNCTION jobwarden_rollup_shard() RETURNS smallint LANGUAGE plpgsql
VOLATILE AS $$
DECLARE
    start int := pg_backend_pid() % 16;
BEGIN
    FOR i IN 0..15 LOOP
        IF pg_try_advisory_xact_lock(hashtext('jobwarden_rollup_shard'), (start + i) % 16)
        THEN
            RETURN 1 + (start + i) % 16;
        END IF;
    END LOOP;
    RETURN 1 + start;
END $$;

-- Count deltas of a statement's inserted/deleted rows (sign +1 / -1), running counted as
-- pending.
CREATE OR REPLACE FUNCTION jobwarden_rollup_rows() RETURNS trigger LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    first_id bigint;
    last_id bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH ins AS (
            INSERT INTO job_count_deltas (status, queue, type, jobs)
            SELECT jobwarden_counted_status(status), queue, type, count(*)
            FROM new_rows
            GROUP BY 1, 2, 3
            RETURNING id
        ) SELECT min(id), max(id) INTO first_id, last_id FROM ins;
    ELSE
        WITH ins AS (
            INSERT INTO job_count_deltas (status, queue, type, jobs)
            SELECT jobwarden_counted_status(status), queue, type, -count(*)
            FROM old_rows
            GROUP BY 1, 2, 3
            RETURNING id
        ) SELECT min(id), max(id) INTO first_id, last_id FROM ins;
    END IF;
    -- Fold when this statement's ids crossed a multiple of 2000.
    IF last_id / 2000 > (first_id - 1) / 2000 THEN
        PERFORM jobwarden_rollup_fold();
    END IF;
    RETURN NULL;
END $$;

-- An UPDATE: moved counts, and outcomes reached, of the rows whose status changed. A
-- statement that leaves every row running (a claim, a renewal) ends no execution. If
-- every row it took was pending or running (one count, "not yet ended") and none took
-- its type's queue (a claim of a job with 'queue' in policy_defaults does), it moves no
-- count either and returns after a scan of each transition table (migration 0094): the
-- claim's trigger writes nothing. Else it only moves counts: each new row +1 and each old row -1,
-- by group, with no join (migrations 0068, 0070). Any other statement joins old and new
-- rows by hash whatever their number (enable_nestloop = off, migration 0069) and counts a
-- move to an outcome as it happens; a move back to pending is counted as its execution's
-- outcome says, as the outcome table's `counted_as` column does
-- (worker/core/transitions.py; tests/integration/test_transitions.py fails if they differ).
-- The check reads old rows alone: an UPDATE by hand that changes the queue or type of a
-- job that stays running is not counted (docs/faults.md; jobwarden_rollup_rebuild).
CREATE OR REPLACE FUNCTION jobwarden_rollup_update() RETURNS trigger LANGUAGE plpgsql
SET jit = off SET enable_nestloop = off AS $$
DECLARE
    first_id bigint;
    last_id bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status <> 'running') THEN
        -- A claim or a renewal: no execution ended here, at most the counts move. A
        -- claim of no job (the producer's replan, LIMIT 0) goes on to the count below,
        -- which inserts nothing then: it plans that statement too, so the first claim of
        -- defaulted jobs after a replan plans nothing (tests/integration/
        -- test_prepared_claim.py).
        IF EXISTS (SELECT 1 FROM old_rows)
           AND NOT EXISTS (SELECT 1 FROM old_rows
                           WHERE status NOT IN ('pending', 'running')
                              OR 'queue' = ANY(policy_defaults)) THEN
            RETURN NULL;
        END IF;
        WITH ins AS (
            INSERT INTO job_count_deltas (status, queue, type, jobs)
            SELECT status, queue, type, sum(d)
            FROM (SELECT 'pending', queue, type, 1 FROM new_rows
                  UNION ALL
                  SELECT jobwarden_counted_status(status), queue, type, -1
                  FROM old_rows)
                 AS deltas (status, queue, type, d)
            GROUP BY status, queue, type HAVING sum(d) <> 0
            RETURNING id
        )
        SELECT min(id), max(id) INTO first_id, last_id FROM ins;
    ELSE
        WITH moved AS (
            SELECT o.status AS old_status, n.status AS new_status,
                   o.queue AS old_queue, n.queue AS new_queue,
                   o.type AS old_type, n.type AS new_type,
                   n.last_error_code AS error_code,
                   -- How the execution that left `running` for `pending` ended, as
                   -- the same statement recorded it (NULL: no execution row); found by
                   -- its job (job_executions_job_idx; migration 0093).
                   CASE WHEN o.status = 'running' AND n.status = 'pending' THEN
                       (SELECT e.outcome FROM job_executions e
                        WHERE e.job_id = o.id AND e.execution_id = o.execution_id)
                   END AS execution_outcome
            FROM old_rows o JOIN new_rows n USING (id)
            WHERE (o.status, o.queue, o.type) IS DISTINCT FROM (n.status, n.queue, n.type)
        ), deltas AS (
            -- Running counted as pending: a retry's or a hand-back's move nets to nothing.
            SELECT jobwarden_counted_status(new_status) AS status,
                   new_queue AS queue, new_type AS type, 1 AS d
            FROM moved
            UNION ALL
            SELECT jobwarden_counted_status(old_status), old_queue, old_type, -1
            FROM moved
        ), ins AS (
            INSERT INTO job_count_deltas (status, queue, type, jobs)
            SELECT status, queue, type, sum(d) FROM deltas
            GROUP BY status, queue, type HAVING sum(d) <> 0
            RETURNING id
        ), outcomes AS (
            INSERT INTO job_minute_counts AS m (minute, queue, type, outcome, error_code, jobs,
                                                shard)
            SELECT date_trunc('minute', now()), new_queue, new_type,
                   CASE WHEN new_status <> 'pending' THEN new_status
                        WHEN execution_outcome = 'snoozed' THEN 'snoozed'
                        ELSE 'retried' END,
                   CASE WHEN new_status IN ('failed', 'unknown')
                          OR (new_status = 'pending'
                              AND execution_outcome IS DISTINCT FROM 'snoozed')
                        THEN coalesce(error_code, '') ELSE '' END,
                   count(*), (SELECT jobwarden_rollup_shard())
            FROM moved
            WHERE old_status <> new_status
              AND (new_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
                   OR (old_status = 'running' AND new_status = 'pending'
                       AND execution_outcome IS DISTINCT FROM 'handed_back'))
            GROUP BY 2, 3, 4, 5
            ORDER BY 2, 3, 4, 5
            ON CONFLICT (minute, queue, type, outcome, error_code, shard)
            DO UPDATE SET jobs = m.jobs + EXCLUDED.jobs
        )
        SELECT min(id), max(id) INTO first_id, last_id FROM ins;
    END IF;
    -- Fold when this statement's ids crossed a multiple of 2000.
    IF last_id / 2000 > (first_id - 1) / 2000 THEN
        PERFORM jobwarden_rollup_fold();
    END IF;
    RETURN NULL;
END $$;

-- TRUNCATE empties both rollups: the jobs they summarised are gone.
CREATE OR REPLACE FUNCTION jobwarden_rollup_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_count_deltas, job_minute_counts;
    RETURN NULL;
END $$;

-- Recount everything from the records of how work ended (demo data, repair after a
-- restore; migration 0019): every finished execution but a hand-back, by its recorded
-- outcome; every operator move to an outcome; jobs in an outcome with neither record.
CREATE OR REPLACE FUNCTION jobwarden_rollup_rebuild() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE background_jobs IN SHARE MODE;
    DELETE FROM job_count_deltas;
    DELETE FROM job_minute_counts;
    INSERT INTO job_count_deltas (status, queue, type, jobs)
    SELECT jobwarden_counted_status(status), queue, type, count(*)
    FROM background_jobs
    GROUP BY 1, 2, 3;
    INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
    SELECT date_trunc('minute', at), queue, type, outcome,
           CASE WHEN outcome IN ('failed', 'unknown', 'retried')
                THEN coalesce(error_code, '') ELSE '' END,
           count(*)
    FROM (
        SELECT e.finished_at AS at, e.queue, e.type, e.error_code,
               CASE WHEN e.outcome = 'retry' THEN 'retried'
                    WHEN e.outcome NOT IN ('worker_lost', 'timeout') THEN e.outcome
                    WHEN coalesce(op.from_status,
                                  CASE WHEN nxt.started_at IS NOT NULL
                                       THEN 'pending' END,
                                  j.status) IN ('pending', 'running') THEN 'retried'
                    ELSE coalesce(op.from_status, j.status) END AS outcome
        FROM job_executions e
        JOIN background_jobs j ON j.id = e.job_id
        LEFT JOIN LATERAL (
            SELECT min(n.started_at) AS started_at FROM job_executions n
            WHERE n.job_id = e.job_id AND n.started_at > e.started_at
        ) nxt ON e.outcome IN ('worker_lost', 'timeout')
        LEFT JOIN LATERAL (
            SELECT a.from_status FROM job_audit a
            WHERE a.job_id = e.job_id AND a.at >= e.finished_at
              AND (nxt.started_at IS NULL OR a.at < nxt.started_at)
            ORDER BY a.at, a.id LIMIT 1
        ) op ON e.outcome IN ('worker_lost', 'timeout')
        WHERE e.finished_at > now() - interval '8 days'
          AND e.outcome <> 'handed_back'
        UNION ALL
        SELECT a.at, j.queue, j.type, j.last_error_code, a.to_status
        FROM job_audit a JOIN background_jobs j ON j.id = a.job_id
        WHERE a.at > now() - interval '8 days'
          AND a.from_status IS DISTINCT FROM a.to_status
          AND a.to_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
        UNION ALL
        SELECT jobwarden_finished_at(j.status, j.completed_at, j.failed_at,
                                     j.cancelled_at, j.skipped_at, j.created_at),
               j.queue, j.type, j.last_error_code, j.status
        FROM background_jobs j
        WHERE j.status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
          AND NOT EXISTS (SELECT 1 FROM job_executions e WHERE e.job_id = j.id)
          AND NOT EXISTS (SELECT 1 FROM job_audit a WHERE a.job_id = j.id)
        UNION ALL
        -- Expired after earlier records (migration 0081): failed, code EXPIRED, with no
        -- execution or operator action at or after its failure (those would have ended
        -- it); the jobs with no record at all are counted just above.
        SELECT j.failed_at, j.queue, j.type, j.last_error_code, 'failed'
        FROM background_jobs j
        WHERE j.status = 'failed' AND j.last_error_code = 'EXPIRED'
          AND (EXISTS (SELECT 1 FROM job_executions e WHERE e.job_id = j.id)
               OR EXISTS (SELECT 1 FROM job_audit a WHERE a.job_id = j.id))
          AND NOT EXISTS (SELECT 1 FROM job_executions e
                          WHERE e.job_id = j.id AND e.finished_at >= j.failed_at)
          AND NOT EXISTS (SELECT 1 FROM job_audit a
                          WHERE a.job_id = j.id AND a.at >= j.failed_at)
    ) o
    WHERE at > now() - interval '8 days'
    GROUP BY 1, 2, 3, 4, 5;
END $$;

-- Statement-level: each reads the statement's transition tables once.
CREATE TRIGGER background_jobs_rollup_insert AFTER INSERT ON background_jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_rows();
CREATE TRIGGER background_jobs_rollup_delete AFTER DELETE ON background_jobs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_rows();
CREATE TRIGGER background_jobs_rollup_update AFTER UPDATE ON background_jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_update();
CREATE TRIGGER background_jobs_rollup_truncate AFTER TRUNCATE ON background_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_truncate();
