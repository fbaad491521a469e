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
