-- One line per operator action (migration 0078), kept by statement-level triggers on
-- job_audit: the console's compact audit view pages through actions, not rows. A bulk
-- action writes a row per job it changed, in chunks (plus a `start_bulk` row for a
-- cancel or skip); its line is one, counting those jobs as the chunks write them.

-- A statement's audit rows, as lines. Its function turns JIT off, as the rollups' do
-- (migration 0067): it plans a few rows' work, which compiling never pays for.
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

-- TRUNCATE of the audit log empties its lines.
CREATE OR REPLACE FUNCTION jobwarden_audit_lines_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_audit_lines;
    RETURN NULL;
END $$;

-- Every line again from the audit log (migration 0078 fills the table with it; a repair
-- after a restore). The same grouping as the trigger's, over every row at once.
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

CREATE TRIGGER job_audit_lines_insert AFTER INSERT ON job_audit
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_audit_lines();
CREATE TRIGGER job_audit_lines_truncate AFTER TRUNCATE ON job_audit
    FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_audit_lines_truncate();
