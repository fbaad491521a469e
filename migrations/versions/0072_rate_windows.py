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

from jobwarden.worker.store.schema_sql import load_sql

revision = "0072"
down_revision = "0071"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        ALTER TABLE job_rate_buckets
            ADD COLUMN window_starts timestamptz[] NOT NULL DEFAULT '{}',
            ADD COLUMN window_counts integer[]     NOT NULL DEFAULT '{}';
    """)
    op.execute(load_sql("jobwarden_window_tokens", revision))
    op.execute(load_sql("jobwarden_window_add", revision))


def downgrade() -> None:
    op.execute("""
        DROP FUNCTION jobwarden_window_add(timestamptz[], integer[], timestamptz, integer,
                                           float8);
        DROP FUNCTION jobwarden_window_tokens(text, float8, float8, timestamptz);
        ALTER TABLE job_rate_buckets DROP COLUMN window_counts, DROP COLUMN window_starts;
    """)
