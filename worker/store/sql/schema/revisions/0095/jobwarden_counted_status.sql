-- The status job_count_deltas counts a job under: running as pending. The one place that
-- says so (migration 0095). A SQL function, immutable, with no SET clause: the planner
-- inlines it into each statement, so it is no call per row.
CREATE OR REPLACE FUNCTION jobwarden_counted_status(status text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN status = 'running' THEN 'pending' ELSE status END
$$;
