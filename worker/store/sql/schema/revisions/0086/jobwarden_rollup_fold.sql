-- Fold the count deltas into one row per key and drop old minutes (the timings' after
-- two days: the SLA page reads an hour; migration 0086).
CREATE OR REPLACE FUNCTION jobwarden_rollup_fold() RETURNS void LANGUAGE plpgsql
SET jit = off AS $$
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
    DELETE FROM job_timings WHERE period < now() - interval '2 days';
END $$;
