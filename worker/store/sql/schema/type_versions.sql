-- The versions of each job type's handler and when each was first published (migration
-- 0078): the console marks on a type's duration chart when a new version started running.

-- A version a type's workers publish for the first time (a new type, or a higher version
-- than job_types held: job_types_publish never lowers it) is recorded with the moment and
-- the worker; a republished version (every worker start) changes nothing. Its function
-- runs once per type and worker start, never on a job's path.
CREATE OR REPLACE FUNCTION jobwarden_type_version_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.version IS DISTINCT FROM OLD.version THEN
        INSERT INTO job_type_versions (type, version, first_at, first_by)
        VALUES (NEW.type, NEW.version, now(), NEW.published_by)
        ON CONFLICT (type, version) DO NOTHING;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER job_types_version_seen AFTER INSERT OR UPDATE OF version ON job_types
    FOR EACH ROW EXECUTE FUNCTION jobwarden_type_version_seen();
