-- A bucket's tokens at `at`: refilled at `rate` per second since it was last
-- spent from, never above `burst`; a bucket with no row is full.
CREATE OR REPLACE FUNCTION jobwarden_tokens(bucket text, rate float8, burst float8,
                                 at timestamptz) RETURNS float8
LANGUAGE sql STABLE AS $$
    SELECT least(burst, coalesce(
        (SELECT b.tokens + rate * greatest(0, extract(epoch FROM at - b.updated_at))
         FROM job_rate_buckets b WHERE b.bucket = jobwarden_tokens.bucket),
        burst))
$$;
