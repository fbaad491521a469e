"""A rate limit's bucket counts the starts of its last window, not refilled tokens.

Revision ID: 0072
Revises: 0071
Create Date: 2026-12-06

A token bucket (migration 0050) lets a scope claim `burst + rate × T` jobs in any T
seconds: with the default burst of one second's worth, a `10/s` type started 19 jobs in
one second, and a provider that counts 10 a second answered 429 to the rest. A bucket now
keeps the starts of its last window of `burst / rate` seconds (one second for `N/s` with
the default burst), as (instant, jobs) pairs: `window_starts`, `window_counts`. A claim
takes at most `burst` minus the jobs started in the window before its instant
(`jobwarden_window_tokens`), so any window of that length, wherever it starts, holds at
most `burst` starts: `N/s` with the default burst is at most N in any one-second window,
and a burst above the rate comes only when a type or a live limit asks for it.

So that a bucket's row stays small however often it is claimed from, a start is recorded
at its instant rounded up to a grid of 1/64 of the window (`jobwarden_window_add`): at
most 65 pairs a bucket. Rounding up only keeps a start counted longer (by at most 1/64 of
the window), never shorter. `tokens` and `updated_at` are still written, as the tokens
left and the last claim's instant; `jobwarden_tokens` stays for the code before this one.
"""

from alembic import op

revision = "0072"
down_revision = "0071"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        ALTER TABLE job_rate_buckets
            ADD COLUMN window_starts timestamptz[] NOT NULL DEFAULT '{}',
            ADD COLUMN window_counts integer[]     NOT NULL DEFAULT '{}';

        -- A bucket's tokens at `at`: its burst less the jobs started in the window of
        -- burst / rate seconds that ends at `at`; a bucket with no row is full. While
        -- its oldest start is still in the window, every one is: the jobs its last claim
        -- left counted (burst - tokens, as that claim wrote them) are the answer without
        -- reading the starts. That is the case of an empty bucket, the one a claim's walk
        -- past a long backlog asks about row after row.
        CREATE FUNCTION jobwarden_window_tokens(bucket text, rate float8, burst float8,
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
        CREATE FUNCTION jobwarden_window_add(starts timestamptz[], counts integer[],
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
    """)


def downgrade() -> None:
    op.execute("""
        DROP FUNCTION jobwarden_window_add(timestamptz[], integer[], timestamptz, integer,
                                           float8);
        DROP FUNCTION jobwarden_window_tokens(text, float8, float8, timestamptz);
        ALTER TABLE job_rate_buckets DROP COLUMN window_counts, DROP COLUMN window_starts;
    """)
