CREATE OR REPLACE FUNCTION jobwarden_audit_lines_rebuild() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE job_audit IN SHARE MODE;
    DELETE FROM job_audit_lines;
    INSERT INTO job_audit_lines (id, bulk_id, at, last_at, actor, role, action, reason, jobs)
    SELECT id, NULL, at, at, actor, role, action, reason, (job_id IS NOT NULL)::int
    FROM job_audit
    WHERE bulk_id IS NULL OR action = 'stop_bulk'
    UNION ALL
    SELECT min(id), bulk_id, min(at), max(at), min(actor), min(role),
           coalesce(min(action) FILTER (WHERE action <> 'start_bulk'),
                    min(details->>'bulk_action'), 'start_bulk'),
           min(reason), count(*) FILTER (WHERE action <> 'start_bulk')
    FROM job_audit
    WHERE bulk_id IS NOT NULL AND action <> 'stop_bulk'
    GROUP BY bulk_id;
END $$;
