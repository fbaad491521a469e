-- Immutable functions that indexes of background_jobs are built on: they exist before
-- the tables' indexes do.

-- Immutable for real: the UTC wall clock of a timestamptz is the same instant whatever
-- the session's TimeZone, and a seconds-only interval moves a timestamp by the same
-- amount on every date. Each priority level is worth 10 seconds of waiting.
CREATE OR REPLACE FUNCTION jobwarden_claim_rank(available_at timestamptz, priority integer)
RETURNS timestamp LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT timezone('UTC', available_at) - priority * interval '10 seconds' $$;

CREATE OR REPLACE FUNCTION jobwarden_finished_at(
    status text, completed_at timestamptz, failed_at timestamptz,
    cancelled_at timestamptz, skipped_at timestamptz, created_at timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT coalesce(CASE status WHEN 'completed' THEN completed_at
                                  WHEN 'failed' THEN failed_at
                                  WHEN 'cancelled' THEN cancelled_at
                                  WHEN 'skipped' THEN skipped_at END, created_at) $$;
