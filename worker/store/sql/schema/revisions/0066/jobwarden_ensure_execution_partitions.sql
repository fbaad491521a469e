-- Create the weekly partitions from this week (or the first week after the default's
-- rows, if later) until `ahead` from now; returns the partitions it created. Weeks are
-- UTC weeks, Monday to Monday; the names say their Monday (job_executions_w20261207).
CREATE OR REPLACE FUNCTION jobwarden_ensure_execution_partitions(ahead interval)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    week timestamptz := date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    first_week timestamptz;
    part text;
BEGIN
    -- CREATE ... PARTITION OF locks job_executions: never queue long before its writes.
    PERFORM set_config('lock_timeout', '2s', true);
    -- Workers all try: one at a time, the others then find the weeks made.
    PERFORM pg_advisory_xact_lock(hashtext('jobwarden.partitions'));
    -- A week before the first partition ever made is the default's: making a partition
    -- for it would have to scan the default (and could meet its rows).
    SELECT min(week_start) INTO first_week FROM jobwarden_execution_partitions();
    IF first_week IS NOT NULL AND first_week > week THEN
        week := first_week;
    END IF;
    WHILE week < now() + ahead LOOP
        part := 'job_executions_w' || to_char(week AT TIME ZONE 'UTC', 'YYYYMMDD');
        IF to_regclass(part) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF job_executions '
                           'FOR VALUES FROM (%L) TO (%L)', part, week,
                           week + interval '7 days');
            RETURN NEXT part;
        END IF;
        week := week + interval '7 days';
    END LOOP;
END $$;
