-- Drop every week whose rows all finished more than `keep` ago (its end is past the age:
-- not its start, or rows up to seven days younger would go), unless a job still in
-- background_jobs has an execution in it (migration 0071: a job retention keeps keeps all
-- its attempts; pending, running and unknown jobs are kept that way too). Returns the
-- names dropped. The default partition is never dropped: it is the table from before the
-- partitioning, whose rows retention deletes with their jobs, and the place for rows no
-- week holds. A DROP takes a short ACCESS EXCLUSIVE lock on job_executions: a lock_timeout
-- keeps it from queueing long in front of the history's writes (the caller tries again
-- next pass).
CREATE OR REPLACE FUNCTION jobwarden_drop_execution_partitions(keep interval)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    p record;
    lo bigint;
    hi bigint;
    kept bool;
BEGIN
    PERFORM set_config('lock_timeout', '2s', true);
    PERFORM pg_advisory_xact_lock(hashtext('jobwarden.partitions'));
    FOR p IN SELECT * FROM jobwarden_execution_partitions()
             WHERE NOT is_default AND week_end <= now() - keep LOOP
        -- The week's job ids, from both ends of its job index.
        EXECUTE format('SELECT min(job_id), max(job_id) FROM %I', p.name) INTO lo, hi;
        -- Each live job in that range probes the week's job index once; the LIMIT keeps
        -- the probe a parameterised index scan, never a hash of the whole week.
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM background_jobs j '
                       'CROSS JOIN LATERAL (SELECT 1 FROM %I e WHERE e.job_id = j.id '
                       'LIMIT 1) hit WHERE j.id BETWEEN $1 AND $2)', p.name)
            INTO kept USING lo, hi;
        IF NOT coalesce(kept, false) THEN
            EXECUTE format('DROP TABLE IF EXISTS %I', p.name);
            RETURN NEXT p.name;
        END IF;
    END LOOP;
END $$;
