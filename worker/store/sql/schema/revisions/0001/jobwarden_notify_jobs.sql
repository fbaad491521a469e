-- Wake idle workers when jobs arrive. Statement-level, so a bulk insert sends one
-- notification per queue; it is delivered only if the enqueuing transaction commits.
CREATE OR REPLACE FUNCTION jobwarden_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jobwarden_jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM new_rows) AS q;
    RETURN NULL;
END $$;
