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
