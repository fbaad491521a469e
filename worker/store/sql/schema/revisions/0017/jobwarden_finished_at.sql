CREATE OR REPLACE FUNCTION jobwarden_finished_at(
    status text, completed_at timestamptz, failed_at timestamptz,
    cancelled_at timestamptz, skipped_at timestamptz, created_at timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT coalesce(CASE status WHEN 'completed' THEN completed_at
                                  WHEN 'failed' THEN failed_at
                                  WHEN 'cancelled' THEN cancelled_at
                                  WHEN 'skipped' THEN skipped_at END, created_at) $$;
