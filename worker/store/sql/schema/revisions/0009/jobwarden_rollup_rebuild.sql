-- Recount everything from the jobs themselves (migration, benchmarks, repair).
-- Outcomes before now are taken from each job's terminal timestamp and, for
-- retries, from executions that ended in a retry.
CREATE OR REPLACE FUNCTION jobwarden_rollup_rebuild() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE background_jobs IN SHARE MODE;
    DELETE FROM job_count_deltas;
    DELETE FROM job_minute_counts;
    INSERT INTO job_count_deltas (status, queue, type, jobs)
    SELECT status, queue, type, count(*) FROM background_jobs
    GROUP BY status, queue, type;
    INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
    SELECT date_trunc('minute', at), queue, type, outcome, error_code, count(*)
    FROM (
        SELECT queue, type, status AS outcome,
               CASE WHEN status = 'failed' THEN coalesce(last_error_code, '')
                    ELSE '' END AS error_code,
               CASE status WHEN 'completed' THEN completed_at
                           WHEN 'failed' THEN failed_at
                           WHEN 'cancelled' THEN cancelled_at
                           WHEN 'skipped' THEN skipped_at END AS at
        FROM background_jobs
        WHERE status IN ('completed', 'failed', 'cancelled', 'skipped')
        UNION ALL
        SELECT queue, type, 'retried', coalesce(error_code, ''), finished_at
        FROM job_executions
        WHERE outcome = 'retry' AND finished_at > now() - interval '8 days'
    ) o
    WHERE at > now() - interval '8 days'
    GROUP BY 1, 2, 3, 4, 5;
END $$;
