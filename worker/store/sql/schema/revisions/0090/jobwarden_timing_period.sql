-- The 5 minutes a time falls in, counted from the epoch (alike in every time zone): the
-- rollup's period. Per 5 minutes, not per minute: the page's intervals are 5 minutes,
-- and an hour of a busy type spread over many buckets is a fifth of the rows to read.
CREATE OR REPLACE FUNCTION jobwarden_timing_period(t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- date_bin over timestamptz is immutable (a fixed interval, no months): the planner
    -- inlines it, not a function call per row in the trigger; and it is plain integer
    -- arithmetic where a timestamptz's epoch is numeric (migration 0090: the trigger's
    -- per-row work halved).
    SELECT date_bin('300 seconds', t, timestamptz '1970-01-01 00:00:00+00')
$$;
