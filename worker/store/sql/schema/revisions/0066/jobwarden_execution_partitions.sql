-- The partitions of job_executions, each with the week it holds (the default has none).
CREATE OR REPLACE FUNCTION jobwarden_execution_partitions()
RETURNS TABLE (name text, week_start timestamptz, week_end timestamptz, is_default bool)
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
           CASE WHEN c.relname ~ '^job_executions_w[0-9]{8}$'
                THEN to_timestamp(substr(c.relname, 17), 'YYYYMMDD') END,
           CASE WHEN c.relname ~ '^job_executions_w[0-9]{8}$'
                THEN to_timestamp(substr(c.relname, 17), 'YYYYMMDD') + interval '7 days' END,
           pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT'
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'job_executions'::regclass
    ORDER BY 2 NULLS FIRST
$$;
