-- Count deltas of a statement's inserted/deleted rows (sign +1 / -1).
CREATE OR REPLACE FUNCTION jobwarden_rollup_rows() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    first_id bigint;
    last_id bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH ins AS (
            INSERT INTO job_count_deltas (status, queue, type, jobs)
            SELECT status, queue, type, count(*) FROM new_rows
            GROUP BY status, queue, type
            RETURNING id
        ) SELECT min(id), max(id) INTO first_id, last_id FROM ins;
    ELSE
        WITH ins AS (
            INSERT INTO job_count_deltas (status, queue, type, jobs)
            SELECT status, queue, type, -count(*) FROM old_rows
            GROUP BY status, queue, type
            RETURNING id
        ) SELECT min(id), max(id) INTO first_id, last_id FROM ins;
    END IF;
    -- Fold when this statement's ids crossed a multiple of 2000.
    IF last_id / 2000 > (first_id - 1) / 2000 THEN
        PERFORM jobwarden_rollup_fold();
    END IF;
    RETURN NULL;
END $$;
