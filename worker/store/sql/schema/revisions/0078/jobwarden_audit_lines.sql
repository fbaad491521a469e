CREATE OR REPLACE FUNCTION jobwarden_audit_lines() RETURNS trigger LANGUAGE plpgsql
SET jit = off AS $$
BEGIN
    -- An action of its own: a row of no bulk action, and a bulk action's stop (an
    -- operator of its own, with a reason of their own).
    INSERT INTO job_audit_lines (id, at, last_at, actor, role, action, reason, jobs)
    SELECT id, at, at, actor, role, action, reason, (job_id IS NOT NULL)::int
    FROM new_rows
    WHERE bulk_id IS NULL OR action = 'stop_bulk';
    -- A bulk action: one line from its first row on, its jobs counted as its chunks
    -- write their rows. Two statements of one action wait for each other on the line's
    -- row (its chunks take turns anyway: console_bulk_step_claim locks the selection);
    -- in bulk_id order, so two statements of several actions never deadlock.
    INSERT INTO job_audit_lines AS l (id, bulk_id, at, last_at, actor, role, action,
                                      reason, jobs)
    SELECT min(id), bulk_id, min(at), max(at), min(actor), min(role),
           coalesce(min(action) FILTER (WHERE action <> 'start_bulk'),
                    min(details->>'bulk_action'), 'start_bulk'),
           min(reason), count(*) FILTER (WHERE action <> 'start_bulk')
    FROM new_rows
    WHERE bulk_id IS NOT NULL AND action <> 'stop_bulk'
    GROUP BY bulk_id
    ORDER BY bulk_id
    ON CONFLICT (bulk_id) WHERE bulk_id IS NOT NULL
    DO UPDATE SET id = least(l.id, EXCLUDED.id), at = least(l.at, EXCLUDED.at),
                  last_at = greatest(l.last_at, EXCLUDED.last_at),
                  jobs = l.jobs + EXCLUDED.jobs;
    RETURN NULL;
END $$;
