-- Workers' wake-up on enqueue. Its function turns JIT off, as the rollups' do (migration
-- 0067): it plans a few rows' work, which compiling never pays for.

-- Wake idle workers when jobs arrive. Statement-level, so a bulk insert sends one
-- notification per queue; it is delivered only if the enqueuing transaction commits.
CREATE OR REPLACE FUNCTION jobwarden_notify_jobs() RETURNS trigger LANGUAGE plpgsql
SET jit = off AS $$
BEGIN
    PERFORM pg_notify('jobwarden_jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM new_rows) AS q;
    RETURN NULL;
END $$;

CREATE TRIGGER background_jobs_notify AFTER INSERT ON background_jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_notify_jobs();
