-- Immutable for real: the UTC wall clock of a timestamptz is the same instant whatever
-- the session's TimeZone, and a seconds-only interval moves a timestamp by the same
-- amount on every date. Each priority level is worth 10 seconds of waiting.
CREATE OR REPLACE FUNCTION jobwarden_claim_rank(available_at timestamptz, priority integer)
RETURNS timestamp LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT timezone('UTC', available_at) - priority * interval '10 seconds' $$;
