-- The periods of executions started since `since` ago again from the history, the rest
-- dropped (migration 0086 fills the last hour, the SLA page's; a repair after a restore).
-- The same grouping as the trigger's. An execution starts before it finishes: the bound
-- on finished_at skips the older weeks' partitions.
CREATE OR REPLACE FUNCTION jobwarden_timings_rebuild(since interval DEFAULT '2 days')
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE job_executions IN SHARE MODE;
    DELETE FROM job_timings;
    INSERT INTO job_timings (period, queue, type, measure, bucket, executions, raised, max_ms)
    SELECT jobwarden_timing_period(e.started_at), e.queue, e.type, m.measure,
           jobwarden_timing_bucket(m.ms), count(*),
           count(*) FILTER (WHERE e.outcome IN ('retry', 'failed', 'timeout', 'unknown')),
           max(m.ms)
    FROM job_executions e
    CROSS JOIN LATERAL (VALUES
        ('wait', date_part('epoch', e.started_at - e.scheduled_at) * 1000),
        ('run', e.duration_ms)) AS m (measure, ms)
    WHERE e.finished_at IS NOT NULL AND m.ms IS NOT NULL
      AND e.started_at >= now() - since AND e.finished_at >= now() - since
    GROUP BY 1, 2, 3, 4, 5;
END $$;
