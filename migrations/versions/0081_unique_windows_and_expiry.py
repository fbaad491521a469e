"""Uniqueness windows, debounce and expiry: a job's deadline, its unique key, its folds.

Revision ID: 0081
Revises: 0079
Create Date: 2026-12-15

`background_jobs.expires_at`: a deadline (NULL: none). The claims take a pending job only
while `expires_at IS NULL OR expires_at > now()`, so an expired job is never started; the
expiry duty (worker/duties/expiry.py) then moves such rows to `failed`, code EXPIRED, in
batches, by the partial index `background_jobs_expiring_idx`, which holds pending jobs
that have a deadline and nothing else: a job without one never writes it.

`background_jobs.unique_key`: the key a job was enqueued under with `unique_for` or
`replace` (docs/guide/uniqueness.md). Not its idempotency key: two jobs of one unique key
in two windows are two operations, and must not share the effects ledger's keys.

`job_unique_keys`: one row per unique key, naming the job that holds it (NULL only inside
the enqueue that creates it), when that job was enqueued and until when its window holds
the key. An enqueue of the key locks the row (an upsert) until the caller's transaction
ends, so concurrent enqueuers of one key decide one after the other, each reading the
last one's committed answer. A key goes with its job when retention deletes the job
(ON DELETE CASCADE, by the index on job_id), so no duty of its own sweeps the table.

`job_folds`: one row per enqueue folded into an existing job (refused inside its window,
or a debounce that replaced its payload), for the job page's count. Append-only: a fold
onto a running job writes no row a worker writes, so an open application transaction
never holds a lock its completer waits for (the foreign key's check takes KEY SHARE, which
no status change conflicts with). Deleted with its job.

`job_types` publishes a type's `unique_for`, `replace` and `expires_after` with the rest
of its policy, so an enqueue by a process that never imported the handler applies them.
`jobwarden_rollup_rebuild()` finds a job that expired after earlier records (a retry's
execution, an operator's action): the rollups' trigger counts every expiry among the
failed outcomes, and the rebuild gives what the trigger counted.
`job_event_totals` counts `expired` too (the expiry duty's counter for /metrics).
Columns are added without a default (no table rewrite); the index is built
CONCURRENTLY, outside the migration's transaction.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0081"
down_revision = "0079"
branch_labels = None
depends_on = None

INDEX = "background_jobs_expiring_idx"


def upgrade() -> None:
    op.execute("ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS expires_at timestamptz")
    op.execute("ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS unique_key text")
    op.execute("""
        CREATE TABLE job_unique_keys (
            key         text        PRIMARY KEY,
            job_id      bigint      REFERENCES background_jobs (id) ON DELETE CASCADE,
            enqueued_at timestamptz NOT NULL DEFAULT now(),
            held_until  timestamptz
        );
        CREATE INDEX job_unique_keys_job_idx ON job_unique_keys (job_id);
        CREATE TABLE job_folds (
            job_id    bigint      NOT NULL REFERENCES background_jobs (id) ON DELETE CASCADE,
            folded_at timestamptz NOT NULL DEFAULT now(),
            replaced  boolean     NOT NULL
        );
        CREATE INDEX job_folds_job_idx ON job_folds (job_id);
        ALTER TABLE job_event_totals DROP CONSTRAINT job_event_totals_event_check;
        ALTER TABLE job_event_totals ADD CONSTRAINT job_event_totals_event_check
            CHECK (event IN ('recovered', 'zombie_outcome', 'zombie_lease', 'expired'));
        ALTER TABLE job_types ADD COLUMN unique_for_seconds float8,
                              ADD COLUMN replace boolean NOT NULL DEFAULT false,
                              ADD COLUMN expires_after_seconds float8;
    """)
    op.execute(load_sql("jobwarden_rollup_rebuild", revision))
    with op.get_context().autocommit_block():
        # A build that failed half-way leaves an invalid index of this name behind.
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
        op.execute(f"CREATE INDEX CONCURRENTLY {INDEX} ON background_jobs (expires_at) "
                   "WHERE status = 'pending' AND expires_at IS NOT NULL")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
    op.execute(load_sql("jobwarden_rollup_rebuild", "0019"))
    op.execute("""
        ALTER TABLE job_types DROP COLUMN IF EXISTS unique_for_seconds,
                              DROP COLUMN IF EXISTS replace,
                              DROP COLUMN IF EXISTS expires_after_seconds;
        DELETE FROM job_event_totals WHERE event = 'expired';
        ALTER TABLE job_event_totals DROP CONSTRAINT job_event_totals_event_check;
        ALTER TABLE job_event_totals ADD CONSTRAINT job_event_totals_event_check
            CHECK (event IN ('recovered', 'zombie_outcome', 'zombie_lease'));
        DROP TABLE IF EXISTS job_folds;
        DROP TABLE IF EXISTS job_unique_keys;
        ALTER TABLE background_jobs DROP COLUMN IF EXISTS unique_key;
        ALTER TABLE background_jobs DROP COLUMN IF EXISTS expires_at;
    """)
