CREATE TRIGGER background_jobs_notify AFTER INSERT ON background_jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_notify_jobs();
