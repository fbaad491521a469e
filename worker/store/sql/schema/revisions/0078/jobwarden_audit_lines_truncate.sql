CREATE OR REPLACE FUNCTION jobwarden_audit_lines_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_audit_lines;
    RETURN NULL;
END $$;
