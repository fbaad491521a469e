CREATE TRIGGER job_audit_lines_insert AFTER INSERT ON job_audit
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_audit_lines();
CREATE TRIGGER job_audit_lines_truncate AFTER TRUNCATE ON job_audit
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_audit_lines_truncate();
