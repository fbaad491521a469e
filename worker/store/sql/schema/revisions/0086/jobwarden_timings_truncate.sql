-- TRUNCATE of the history empties the rollup: the executions it summarised are gone.
CREATE OR REPLACE FUNCTION jobwarden_timings_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_timings;
    RETURN NULL;
END $$;
