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
