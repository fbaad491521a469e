CREATE TRIGGER background_jobs_payload_insert AFTER INSERT ON background_jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_payload_object();

CREATE TRIGGER background_jobs_payload_update BEFORE UPDATE OF payload ON background_jobs
    FOR EACH ROW EXECUTE FUNCTION jobwarden_payload_object();
