-- Drop every week whose rows all finished more than `keep` ago, unless it holds history
-- of a job that is not finished (pending, running, unknown: retention never deletes those
-- jobs, and an unknown job's attempts are the evidence its reconciliation needs; such a
-- week waits until they have finished). Returns the names dropped. The default
-- partition is never dropped: it is the table from before the partitioning, whose rows
-- retention still deletes with their jobs, and the place for rows no week holds.
-- A DROP takes a short ACCESS EXCLUSIVE lock on job_executions: a lock_timeout keeps it
-- from queueing long in front of the history's writes (the caller tries again next pass).
CREATE OR REPLACE FUNCTION jobwarden_drop_execution_partitions(keep interval)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    p record;
    kept bool;
BEGIN
    PERFORM set_config('lock_timeout', '2s', true);
    PERFORM pg_advisory_xact_lock(hashtext('jobwarden.partitions'));
    FOR p IN SELECT * FROM jobwarden_execution_partitions()
             WHERE NOT is_default AND week_end <= now() - keep LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I e JOIN background_jobs j '
                       'ON j.id = e.job_id '
                       'WHERE j.status IN (''pending'', ''running'', ''unknown''))',
                       p.name) INTO kept;
        IF NOT kept THEN
            EXECUTE format('DROP TABLE IF EXISTS %I', p.name);
            RETURN NEXT p.name;
        END IF;
    END LOOP;
END $$;
