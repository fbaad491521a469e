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
