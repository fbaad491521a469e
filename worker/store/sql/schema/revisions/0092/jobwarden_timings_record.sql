-- A statement's finished executions into the rollup: one upsert per key, in key order so
-- two statements never deadlock (as job_minute_counts'), into the transaction's shard
-- (jobwarden_rollup_shard, migration 0092) so two writers never wait for each other. A
-- row is keyed by the 5 minutes its execution started in, as the SLA page's hour and its
-- intervals are. An UPDATE counts the rows it closed (an execution opened by a runtime
-- from before migration 0061), and only those.
CREATE OR REPLACE FUNCTION jobwarden_timings_record() RETURNS trigger LANGUAGE plpgsql
SET jit = off AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO job_timings AS t (period, queue, type, measure, bucket, executions,
                                      raised, max_ms, shard)
        SELECT jobwarden_timing_period(e.started_at), e.queue, e.type, m.measure,
               jobwarden_timing_bucket(m.ms), count(*),
               count(*) FILTER (WHERE e.outcome IN ('retry', 'failed', 'timeout', 'unknown')),
               max(m.ms), (SELECT jobwarden_rollup_shard())
        FROM new_rows e
        CROSS JOIN LATERAL (VALUES
            ('wait', date_part('epoch', e.started_at - e.scheduled_at) * 1000),
            ('run', e.duration_ms)) AS m (measure, ms)
        WHERE e.finished_at IS NOT NULL AND m.ms IS NOT NULL
        GROUP BY 1, 2, 3, 4, 5
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (period, queue, type, measure, bucket, shard)
        DO UPDATE SET executions = t.executions + EXCLUDED.executions,
                      raised = t.raised + EXCLUDED.raised,
                      max_ms = greatest(t.max_ms, EXCLUDED.max_ms);
    ELSIF EXISTS (SELECT 1 FROM old_rows WHERE finished_at IS NULL) THEN
        -- (A statement-level trigger fires for every UPDATE, finish_executions' of no
        -- open row included: nothing to read then.)
        INSERT INTO job_timings AS t (period, queue, type, measure, bucket, executions,
                                      raised, max_ms, shard)
        SELECT jobwarden_timing_period(e.started_at), e.queue, e.type, m.measure,
               jobwarden_timing_bucket(m.ms), count(*),
               count(*) FILTER (WHERE e.outcome IN ('retry', 'failed', 'timeout', 'unknown')),
               max(m.ms), (SELECT jobwarden_rollup_shard())
        FROM new_rows e
        CROSS JOIN LATERAL (VALUES
            ('wait', date_part('epoch', e.started_at - e.scheduled_at) * 1000),
            ('run', e.duration_ms)) AS m (measure, ms)
        WHERE e.finished_at IS NOT NULL AND m.ms IS NOT NULL
          AND e.id IN (SELECT o.id FROM old_rows o WHERE o.finished_at IS NULL)
        GROUP BY 1, 2, 3, 4, 5
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (period, queue, type, measure, bucket, shard)
        DO UPDATE SET executions = t.executions + EXCLUDED.executions,
                      raised = t.raised + EXCLUDED.raised,
                      max_ms = greatest(t.max_ms, EXCLUDED.max_ms);
    END IF;
    RETURN NULL;
END $$;
