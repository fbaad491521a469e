-- The 5 minutes a time falls in, counted from the epoch (alike in every time zone): the
-- rollup's period. Per 5 minutes, not per minute: the page's intervals are 5 minutes,
-- and an hour of a busy type spread over many buckets is a fifth of the rows to read.
CREATE OR REPLACE FUNCTION jobwarden_timing_period(t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- Immutable throughout (an interval's epoch, not a timestamptz's, which is only
    -- stable): the planner inlines it, not a function call per row in the trigger.
    SELECT to_timestamp(floor(extract(epoch FROM t - timestamptz '1970-01-01 00:00:00+00')
                              / 300) * 300)
$$;
