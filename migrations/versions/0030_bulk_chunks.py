"""Bulk actions at any size: a selection's jobs in pages, and its progress in chunks.

Revision ID: 0030
Revises: 0021
Create Date: 2026-12-02

A console selection held its jobs in one `bigint[]` column, at most 10,000 of them, and
its action ran in one statement. Now a selection may hold any number of jobs, and its
action runs in chunks, each one transaction (a compare-and-set over the chunk's jobs with
an audit row per job, all under the selection's id as `bulk_id`):

- `console_selection_jobs` holds the selected ids in pages of up to 1,000, in the order
  the action takes them (newest first). An array per page keeps a million ids in a
  thousand rows of 8 kB, written by one `INSERT … SELECT`.
- `console_selections` gains how many jobs it holds and their `breakdown` by status, type
  and failure age, counted by the statement that stored them (so a review costs the same
  for ten jobs or a million), and the action's state: `reviewed` (not started), `canary` (the
  first `canary` jobs only, then a decision), `running`, `stopped`, `done`; `next_ord`,
  how many of its jobs (in page order) the chunks have dealt with; the totals changed
  and left alone; the operator's reason and the form's request id. Progress lives in
  the database, so a restarted console carries on where the last committed chunk ended.
- `console_bulk_steps` records each chunk once (`(selection_id, first_ord)` is its key,
  so a chunk cannot be done twice) with the ids it left alone because they had moved on.

Existing selections keep their ids: they are copied into pages before the column goes.
"""

from alembic import op

revision = "0030"
down_revision = "0021"
branch_labels = None
depends_on = None

STATES = "('reviewed', 'canary', 'running', 'stopped', 'done')"


def upgrade() -> None:
    op.execute(f"""
        CREATE TABLE console_selection_jobs (
            selection_id uuid NOT NULL REFERENCES console_selections (id) ON DELETE CASCADE,
            page         integer NOT NULL,
            job_ids      bigint[] NOT NULL,
            PRIMARY KEY (selection_id, page)
        );
        INSERT INTO console_selection_jobs (selection_id, page, job_ids)
        SELECT s.id, (u.ord - 1) / 1000, array_agg(u.job_id ORDER BY u.ord)
        FROM console_selections s
        CROSS JOIN LATERAL unnest(s.job_ids) WITH ORDINALITY AS u (job_id, ord)
        GROUP BY s.id, (u.ord - 1) / 1000;

        ALTER TABLE console_selections
            ADD COLUMN jobs integer NOT NULL DEFAULT 0,
            ADD COLUMN breakdown jsonb,
            ADD COLUMN state text NOT NULL DEFAULT 'reviewed',
            ADD COLUMN reason text,
            ADD COLUMN request_id text,
            ADD COLUMN canary integer,
            ADD COLUMN next_ord integer NOT NULL DEFAULT 0,
            ADD COLUMN changed integer NOT NULL DEFAULT 0,
            ADD COLUMN left_alone integer NOT NULL DEFAULT 0,
            ADD COLUMN finished_at timestamptz,
            ADD CONSTRAINT console_selections_state_check CHECK (state IN {STATES});
        -- A selection used before this migration acted in one statement: it is done. One
        -- still usable (unused, of the last hour) gets its review's breakdown.
        UPDATE console_selections s
        SET breakdown = (
            SELECT jsonb_agg(to_jsonb(c) ORDER BY c.status, c.type, c.age) FROM (
                SELECT j.status, j.type,
                       CASE WHEN j.failed_at IS NULL THEN 'never'
                            WHEN j.failed_at >= now() - interval '1 hour' THEN 'hour'
                            WHEN j.failed_at >= now() - interval '1 day' THEN 'day'
                            WHEN j.failed_at >= now() - interval '7 days' THEN 'week'
                            ELSE 'older' END AS age,
                       count(*) AS jobs
                FROM unnest(s.job_ids) AS u (id) JOIN background_jobs j ON j.id = u.id
                GROUP BY 1, 2, 3) c)
        WHERE s.used_at IS NULL AND s.created_at > now() - interval '1 hour';
        UPDATE console_selections
        SET jobs = cardinality(job_ids),
            state = CASE WHEN used_at IS NULL THEN 'reviewed' ELSE 'done' END,
            next_ord = CASE WHEN used_at IS NULL THEN 0 ELSE cardinality(job_ids) END,
            finished_at = used_at;
        ALTER TABLE console_selections DROP COLUMN job_ids;
        -- The audit log lists the bulk actions still under way.
        CREATE INDEX console_selections_unfinished_idx ON console_selections (created_at)
            WHERE state IN ('canary', 'running');

        CREATE TABLE console_bulk_steps (
            selection_id uuid NOT NULL REFERENCES console_selections (id) ON DELETE CASCADE,
            first_ord    integer NOT NULL,
            last_ord     integer NOT NULL,
            at           timestamptz NOT NULL DEFAULT now(),
            changed      integer NOT NULL,
            left_alone   bigint[] NOT NULL,
            PRIMARY KEY (selection_id, first_ord)
        );
    """)


def downgrade() -> None:
    op.execute("""
        DROP TABLE IF EXISTS console_bulk_steps;
        DROP INDEX IF EXISTS console_selections_unfinished_idx;
        ALTER TABLE console_selections ADD COLUMN job_ids bigint[];
        UPDATE console_selections s
        SET job_ids = coalesce((SELECT array_agg(u.job_id ORDER BY p.page, u.ord)
                                FROM console_selection_jobs p
                                CROSS JOIN LATERAL unnest(p.job_ids) WITH ORDINALITY
                                    AS u (job_id, ord)
                                WHERE p.selection_id = s.id), '{}');
        ALTER TABLE console_selections ALTER COLUMN job_ids SET NOT NULL,
            DROP CONSTRAINT console_selections_state_check,
            DROP COLUMN jobs, DROP COLUMN breakdown, DROP COLUMN state, DROP COLUMN reason,
            DROP COLUMN request_id, DROP COLUMN canary, DROP COLUMN next_ord,
            DROP COLUMN changed, DROP COLUMN left_alone, DROP COLUMN finished_at;
        DROP TABLE IF EXISTS console_selection_jobs;
    """)
