-- TRUNCATE empties both rollups: the jobs they summarised are gone.
CREATE OR REPLACE FUNCTION jobwarden_rollup_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_count_deltas, job_minute_counts;
    RETURN NULL;
END $$;
