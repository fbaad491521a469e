-- Rate limits' buckets (docs/guide/rate-limits.md).

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

-- The bucket a job of `type` draws from: the type's, or with a key path
-- ('account.id'), the type's bucket of that payload value (a job without it:
-- the bucket of the empty key).
CREATE OR REPLACE FUNCTION jobwarden_rate_bucket(type text, path text, payload jsonb)
    RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'type:' || type || CASE WHEN path IS NULL THEN ''
        ELSE '#' || coalesce(payload #>> string_to_array(path, '.'), '') END
$$;

-- A bucket's tokens at `at`: its burst less the jobs started in the window of
-- burst / rate seconds that ends at `at`; a bucket with no row is full. While
-- its oldest start is still in the window, every one is: the jobs its last claim
-- left counted (burst - tokens, as that claim wrote them) are the answer without
-- reading the starts. That is the case of an empty bucket, the one a claim's walk
-- past a long backlog asks about row after row.
CREATE OR REPLACE FUNCTION jobwarden_window_tokens(bucket text, rate float8, burst float8,
                                        at timestamptz) RETURNS float8
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT CASE WHEN b.window_starts[1] > jobwarden_window_tokens.at
                          - make_interval(secs => burst / rate)
                     THEN burst - (b.burst - b.tokens)
                     ELSE burst - coalesce(
                         (SELECT sum(w.n)
                          FROM unnest(b.window_starts, b.window_counts) AS w(at, n)
                          WHERE w.at > jobwarden_window_tokens.at
                                       - make_interval(secs => burst / rate)), 0)
                END
         FROM job_rate_buckets b WHERE b.bucket = jobwarden_window_tokens.bucket),
        burst)
$$;

-- A window's starts with `n` more at `at`: those still in the window of `secs`
-- seconds, each at its instant rounded up to a grid of secs / 64 (pairs on one
-- point of the grid add up), so at most 65 pairs.
CREATE OR REPLACE FUNCTION jobwarden_window_add(starts timestamptz[], counts integer[],
                                     at timestamptz, n integer, secs float8,
                                     OUT window_starts timestamptz[],
                                     OUT window_counts integer[])
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(array_agg(g.at ORDER BY g.at), '{}'),
           coalesce(array_agg(g.n ORDER BY g.at), '{}')
    FROM (SELECT e.at, sum(e.n)::int AS n
          FROM (SELECT w.at, w.n FROM unnest(starts, counts) AS w(at, n)
                WHERE w.at > jobwarden_window_add.at - make_interval(secs => secs)
                UNION ALL
                SELECT to_timestamp(ceil(extract(epoch FROM jobwarden_window_add.at)
                                         / (secs / 64)) * (secs / 64)),
                       jobwarden_window_add.n) AS e
          GROUP BY e.at) AS g
$$;
