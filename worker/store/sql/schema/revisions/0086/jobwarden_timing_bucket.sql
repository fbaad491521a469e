-- The bucket of a time in milliseconds: 0 holds [0, 1 ms) (and a negative time: a clock
-- that went back), bucket b >= 1 holds [2^((b-1)/8), 2^(b/8)) ms. A percentile read as
-- its bucket's upper edge is at most 2^(1/8) - 1 = 9.05% high, never low (1 ms at most
-- under 1 ms). A time past 2^50 ms (35,000 years, infinity, NaN) counts in bucket 400:
-- a hostile value cannot make a bucket number the table cannot hold.
CREATE OR REPLACE FUNCTION jobwarden_timing_bucket(ms float8) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ms IS NULL THEN NULL
                WHEN NOT ms >= 1 THEN 0  -- NaN >= 1 is true in PostgreSQL: it goes last
                ELSE least(400, 1 + floor(8 * ln(ms) / ln(2)))::int END
$$;
