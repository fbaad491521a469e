CREATE TRIGGER background_jobs_rollup_insert AFTER INSERT ON background_jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_rows();
CREATE TRIGGER background_jobs_rollup_delete AFTER DELETE ON background_jobs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_rows();
CREATE TRIGGER background_jobs_rollup_update AFTER UPDATE ON background_jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_update();
CREATE TRIGGER background_jobs_rollup_truncate AFTER TRUNCATE ON background_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_truncate();
