CREATE OR REPLACE FUNCTION jobwarden_payload_object() RETURNS trigger LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    kind text;
BEGIN
    IF TG_LEVEL = 'ROW' THEN
        kind := jsonb_typeof(NEW.payload);
    ELSE
        SELECT jsonb_typeof(payload) INTO kind FROM new_rows
        WHERE jsonb_typeof(payload) <> 'object' LIMIT 1;
    END IF;
    IF kind <> 'object' THEN
        RAISE EXCEPTION 'a job''s payload must be a JSON object, not %', kind
            USING ERRCODE = 'check_violation', TABLE = 'background_jobs',
                  CONSTRAINT = 'background_jobs_payload_check';
    END IF;
    IF TG_LEVEL = 'ROW' THEN
        RETURN NEW;
    END IF;
    RETURN NULL;
END $$;
