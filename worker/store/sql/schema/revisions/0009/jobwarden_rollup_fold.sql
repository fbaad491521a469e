-- Fold the count deltas into one row per key and drop old minutes.
CREATE OR REPLACE FUNCTION jobwarden_rollup_fold() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('jobwarden_rollup_fold')) THEN
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM job_count_deltas RETURNING status, queue, type, jobs
    )
    INSERT INTO job_count_deltas (status, queue, type, jobs)
    SELECT status, queue, type, sum(jobs) FROM gone
    GROUP BY status, queue, type HAVING sum(jobs) <> 0;
    DELETE FROM job_minute_counts WHERE minute < now() - interval '8 days';
END $$;
