-- A job's payload is a JSON object (migration 0096). Checked where a payload is written,
-- an insert or an UPDATE that sets it, and nowhere else: a CHECK constraint ran at every
-- update of the row (a claim, a finish, a heartbeat), and reading the payload detoasts
-- it, so a job with an 8 KB payload spent a fifth to a quarter of its server CPU there
-- (docs/benchmarks.md, "A payload's check"). The error is the one the constraint
-- raised: check_violation, naming background_jobs_payload_check.
-- An insert is checked once a statement, over its new rows (the transition table the
-- other insert triggers read too): a row trigger cost a bulk enqueue about a tenth more.
-- An UPDATE OF payload (a replace by unique key, a hand-made fix) row by row.
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

CREATE TRIGGER background_jobs_payload_insert AFTER INSERT ON background_jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_payload_object();

CREATE TRIGGER background_jobs_payload_update BEFORE UPDATE OF payload ON background_jobs
    FOR EACH ROW EXECUTE FUNCTION jobwarden_payload_object();
