CREATE OR REPLACE FUNCTION jobwarden_type_version_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.version IS DISTINCT FROM OLD.version THEN
        INSERT INTO job_type_versions (type, version, first_at, first_by)
        VALUES (NEW.type, NEW.version, now(), NEW.published_by)
        ON CONFLICT (type, version) DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
