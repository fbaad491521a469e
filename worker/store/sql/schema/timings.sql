-- Time to start and run time per 5 minutes, job type and queue (migration 0086), kept by a
-- statement-level trigger on job_executions: the SLA page reads an hour of these, not an
-- hour of executions, so its cost does not grow with the traffic.

-- The 5 minutes a time falls in, counted from the epoch (alike in every time zone): the
-- rollup's period. Per 5 minutes, not per minute: the page's intervals are 5 minutes,
-- and an hour of a busy type spread over many buckets is a fifth of the rows to read.
CREATE OR REPLACE FUNCTION jobwarden_timing_period(t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- date_bin over timestamptz is immutable (a fixed interval, no months): the planner
    -- inlines it, not a function call per row in the trigger; and it is plain integer
    -- arithmetic where a timestamptz's epoch is numeric (migration 0090: the trigger's
    -- per-row work halved).
    SELECT date_bin('300 seconds', t, timestamptz '1970-01-01 00:00:00+00')
$$;

-- The bucket of a time in milliseconds: 0 holds [0, 1 ms) (and a negative time: a clock
-- that went back), bucket b >= 1 holds [2^((b-1)/8), 2^(b/8)) ms. A percentile read as
-- its bucket's upper edge is at most 2^(1/8) - 1 = 9.05% high, never low (1 ms at most
-- under 1 ms). A time past 2^50 ms (35,000 years, infinity, NaN) counts in bucket 400:
-- a hostile value cannot make a bucket number the table cannot hold.
CREATE OR REPLACE FUNCTION jobwarden_timing_bucket(ms float8) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ms IS NULL THEN NULL
                WHEN NOT ms >= 1 THEN 0  -- NaN >= 1 is true in PostgreSQL: it goes last
                ELSE least(400, 1 + floor(8 * ln(ms) / ln(2)))::int END
$$;

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

-- TRUNCATE of the history empties the rollup: the executions it summarised are gone.
CREATE OR REPLACE FUNCTION jobwarden_timings_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_timings;
    RETURN NULL;
END $$;

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
-- On the partitioned parent: a statement-level trigger on it fires for the statements
-- that name it (every writer of the history does) and its transition table holds the
-- rows whatever partition they went to. Statement-level triggers are not cloned to the
-- partitions: a statement naming one partition directly is not counted.
CREATE TRIGGER job_executions_timings_insert AFTER INSERT ON job_executions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_timings_record();
CREATE TRIGGER job_executions_timings_update AFTER UPDATE ON job_executions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_timings_record();
CREATE TRIGGER job_executions_timings_truncate AFTER TRUNCATE ON job_executions
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_timings_truncate();
