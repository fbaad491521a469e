-- An UPDATE: moved counts, and outcomes reached, of the rows whose status changed.
CREATE OR REPLACE FUNCTION jobwarden_rollup_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    first_id bigint;
    last_id bigint;
BEGIN
    WITH moved AS (
        SELECT o.status AS old_status, n.status AS new_status,
               o.queue AS old_queue, n.queue AS new_queue,
               o.type AS old_type, n.type AS new_type,
               n.last_error_code AS error_code
        FROM old_rows o JOIN new_rows n USING (id)
        WHERE (o.status, o.queue, o.type) IS DISTINCT FROM (n.status, n.queue, n.type)
    ), deltas AS (
        SELECT new_status AS status, new_queue AS queue, new_type AS type, 1 AS d
        FROM moved
        UNION ALL
        SELECT old_status, old_queue, old_type, -1 FROM moved
    ), ins AS (
        INSERT INTO job_count_deltas (status, queue, type, jobs)
        SELECT status, queue, type, sum(d) FROM deltas
        GROUP BY status, queue, type HAVING sum(d) <> 0
        RETURNING id
    ), outcomes AS (
        INSERT INTO job_minute_counts AS m (minute, queue, type, outcome, error_code, jobs)
        SELECT date_trunc('minute', now()), new_queue, new_type,
               CASE WHEN new_status = 'pending' THEN 'retried' ELSE new_status END,
               CASE WHEN new_status IN ('failed', 'unknown', 'pending')
                    THEN coalesce(error_code, '') ELSE '' END,
               count(*)
        FROM moved
        WHERE old_status <> new_status
          AND (new_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
               OR (old_status = 'running' AND new_status = 'pending'))
        GROUP BY 2, 3, 4, 5
        ORDER BY 2, 3, 4, 5
        ON CONFLICT (minute, queue, type, outcome, error_code)
        DO UPDATE SET jobs = m.jobs + EXCLUDED.jobs
    )
    SELECT min(id), max(id) INTO first_id, last_id FROM ins;
    -- Fold when this statement's ids crossed a multiple of 2000.
    IF last_id / 2000 > (first_id - 1) / 2000 THEN
        PERFORM jobwarden_rollup_fold();
    END IF;
    RETURN NULL;
END $$;
