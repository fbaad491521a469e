-- The shard (1-16) this transaction adds its outcomes to (job_minute_counts,
-- job_timings; migration 0092): one no other open transaction holds, so two writers of
-- outcomes (a worker's two, or a fleet's) never wait for each other's commit on a rollup
-- row, as they did when every finish of a type in a minute added to the same row. Held
-- by a transaction-level advisory lock, tried from a start of the backend's own (its
-- pid): the same shard again for the same transaction (both triggers of one finish), a
-- free one for a concurrent writer. With all 16 held, the pid's: more writers than
-- shards share rows and wait, as before. Shard 0 holds what the fold gathered (and what
-- a rebuild wrote); no writer takes it, so the fold waits for no writer.
CREATE OR REPLACE FUNCTION jobwarden_rollup_shard() RETURNS smallint LANGUAGE plpgsql
VOLATILE AS $$
DECLARE
    start int := pg_backend_pid() % 16;
BEGIN
    FOR i IN 0..15 LOOP
        IF pg_try_advisory_xact_lock(hashtext('jobwarden_rollup_shard'), (start + i) % 16)
        THEN
            RETURN 1 + (start + i) % 16;
        END IF;
    END LOOP;
    RETURN 1 + start;
END $$;
