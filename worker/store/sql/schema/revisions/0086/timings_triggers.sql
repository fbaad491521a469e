-- On the partitioned parent: a statement-level trigger on it fires for the statements
-- that name it (every writer of the history does) and its transition table holds the
-- rows whatever partition they went to. Statement-level triggers are not cloned to the
-- partitions: a statement naming one partition directly is not counted.
CREATE TRIGGER job_executions_timings_insert AFTER INSERT ON job_executions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_timings_record();
CREATE TRIGGER job_executions_timings_update AFTER UPDATE ON job_executions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_timings_record();
CREATE TRIGGER job_executions_timings_truncate AFTER TRUNCATE ON job_executions
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_timings_truncate();
