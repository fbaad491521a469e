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
