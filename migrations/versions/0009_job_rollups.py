"""Job rollups: current counts and per-minute outcomes, kept by the statements that change jobs.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30

The console's overview, trend chart, usual-rate baseline and /metrics must not count
every job per request (an index-only scan that grows with the table). Two tables keep the
answers instead, written by statement-level triggers on `background_jobs` that read the
statement's transition tables (docs/architecture.md §3, "Rollups"):

* `job_count_deltas` — signed deltas of the number of jobs per (status, queue, type).
  Append-only, so concurrent enqueues in long application transactions never wait on a
  shared counter row; the current count is the sum. A statement that finds the table
  longer than a few thousand rows folds it into one row per key (DELETE ... RETURNING
  sums exactly the rows it removed, so a concurrent fold cannot double-count; an
  advisory try-lock keeps folds from waiting on one another).
* `job_minute_counts` — jobs that reached an outcome (completed, failed, retried,
  cancelled, skipped, unknown) per (minute, queue, type, outcome): one upsert per key and
  statement, in key order so two statements never deadlock. Failures, retries and
  unknown outcomes also carry the job's error code, for the failed groups' streaks.
  Minutes older than 8 days are dropped by the fold (the usual-rate baseline looks back
  7 days).

Because the triggers see whatever rows a statement changed, they count single-row
compare-and-set outcomes, batched completions, recovery and operator actions alike,
without any of those statements knowing about them.

Measured cost on the completion path (bench/bench_rollup.py: 10,000 running jobs
completed by the worker's own batch statement, finish_executions, 100 rows a statement,
one transaction each, triggers enabled vs disabled, alternating which goes first, on the
shared 2-core machine, load average about 3): median of 9 rounds 7.45 ms per statement
with the triggers against 7.10 ms without, +0.35 ms per 100-row statement (+5%, about
3.5 µs per job); rounds 0.66-0.96 s on, 0.65-0.82 s off. One-row statements (2,000 jobs,
5 rounds): 1.15 vs 0.92 ms, +0.23 ms per statement (+25%). Earlier runs with a plain
100-row UPDATE instead of finish_executions gave +0.13 to +2.7 ms per statement, the
high figure beside a 10M-row load: rerun bench_rollup.py before relying on a figure.
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE job_count_deltas (
            id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            status  text NOT NULL,
            queue   text NOT NULL,
            type    text NOT NULL,
            jobs    bigint NOT NULL
        );
        CREATE TABLE job_minute_counts (
            minute  timestamptz NOT NULL,
            queue   text NOT NULL,
            type    text NOT NULL,
            outcome text NOT NULL,
            error_code text NOT NULL DEFAULT '',
            jobs    bigint NOT NULL,
            PRIMARY KEY (minute, queue, type, outcome, error_code)
        );
        -- Failed groups: each code's streak and its last hour, without reading jobs.
        CREATE INDEX job_minute_counts_error_idx ON job_minute_counts (error_code, minute)
            WHERE error_code <> '';

        -- Fold the count deltas into one row per key and drop old minutes.
        CREATE FUNCTION jobwarden_rollup_fold() RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            IF NOT pg_try_advisory_xact_lock(hashtext('jobwarden_rollup_fold')) THEN
                RETURN;
            END IF;
            WITH gone AS (
                DELETE FROM job_count_deltas RETURNING status, queue, type, jobs
            )
            INSERT INTO job_count_deltas (status, queue, type, jobs)
            SELECT status, queue, type, sum(jobs) FROM gone
            GROUP BY status, queue, type HAVING sum(jobs) <> 0;
            DELETE FROM job_minute_counts WHERE minute < now() - interval '8 days';
        END $$;

        -- Count deltas of a statement's inserted/deleted rows (sign +1 / -1).
        CREATE FUNCTION jobwarden_rollup_rows() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            first_id bigint;
            last_id bigint;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                WITH ins AS (
                    INSERT INTO job_count_deltas (status, queue, type, jobs)
                    SELECT status, queue, type, count(*) FROM new_rows
                    GROUP BY status, queue, type
                    RETURNING id
                ) SELECT min(id), max(id) INTO first_id, last_id FROM ins;
            ELSE
                WITH ins AS (
                    INSERT INTO job_count_deltas (status, queue, type, jobs)
                    SELECT status, queue, type, -count(*) FROM old_rows
                    GROUP BY status, queue, type
                    RETURNING id
                ) SELECT min(id), max(id) INTO first_id, last_id FROM ins;
            END IF;
            -- Fold when this statement's ids crossed a multiple of 2000.
            IF last_id / 2000 > (first_id - 1) / 2000 THEN
                PERFORM jobwarden_rollup_fold();
            END IF;
            RETURN NULL;
        END $$;

        -- An UPDATE: moved counts, and outcomes reached, of the rows whose status changed.
        CREATE FUNCTION jobwarden_rollup_update() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            first_id bigint;
            last_id bigint;
        BEGIN
            WITH moved AS (
                SELECT o.status AS old_status, n.status AS new_status,
                       o.queue AS old_queue, n.queue AS new_queue,
                       o.type AS old_type, n.type AS new_type,
                       n.last_error_code AS error_code
                FROM old_rows o JOIN new_rows n USING (id)
                WHERE (o.status, o.queue, o.type) IS DISTINCT FROM (n.status, n.queue, n.type)
            ), deltas AS (
                SELECT new_status AS status, new_queue AS queue, new_type AS type, 1 AS d
                FROM moved
                UNION ALL
                SELECT old_status, old_queue, old_type, -1 FROM moved
            ), ins AS (
                INSERT INTO job_count_deltas (status, queue, type, jobs)
                SELECT status, queue, type, sum(d) FROM deltas
                GROUP BY status, queue, type HAVING sum(d) <> 0
                RETURNING id
            ), outcomes AS (
                INSERT INTO job_minute_counts AS m (minute, queue, type, outcome, error_code, jobs)
                SELECT date_trunc('minute', now()), new_queue, new_type,
                       CASE WHEN new_status = 'pending' THEN 'retried' ELSE new_status END,
                       CASE WHEN new_status IN ('failed', 'unknown', 'pending')
                            THEN coalesce(error_code, '') ELSE '' END,
                       count(*)
                FROM moved
                WHERE old_status <> new_status
                  AND (new_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
                       OR (old_status = 'running' AND new_status = 'pending'))
                GROUP BY 2, 3, 4, 5
                ORDER BY 2, 3, 4, 5
                ON CONFLICT (minute, queue, type, outcome, error_code)
                DO UPDATE SET jobs = m.jobs + EXCLUDED.jobs
            )
            SELECT min(id), max(id) INTO first_id, last_id FROM ins;
            -- Fold when this statement's ids crossed a multiple of 2000.
            IF last_id / 2000 > (first_id - 1) / 2000 THEN
                PERFORM jobwarden_rollup_fold();
            END IF;
            RETURN NULL;
        END $$;

        -- TRUNCATE empties both rollups: the jobs they summarised are gone.
        CREATE FUNCTION jobwarden_rollup_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            TRUNCATE job_count_deltas, job_minute_counts;
            RETURN NULL;
        END $$;

        -- Recount everything from the jobs themselves (migration, benchmarks, repair).
        -- Outcomes before now are taken from each job's terminal timestamp and, for
        -- retries, from executions that ended in a retry.
        CREATE FUNCTION jobwarden_rollup_rebuild() RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            LOCK TABLE background_jobs IN SHARE MODE;
            DELETE FROM job_count_deltas;
            DELETE FROM job_minute_counts;
            INSERT INTO job_count_deltas (status, queue, type, jobs)
            SELECT status, queue, type, count(*) FROM background_jobs
            GROUP BY status, queue, type;
            INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
            SELECT date_trunc('minute', at), queue, type, outcome, error_code, count(*)
            FROM (
                SELECT queue, type, status AS outcome,
                       CASE WHEN status = 'failed' THEN coalesce(last_error_code, '')
                            ELSE '' END AS error_code,
                       CASE status WHEN 'completed' THEN completed_at
                                   WHEN 'failed' THEN failed_at
                                   WHEN 'cancelled' THEN cancelled_at
                                   WHEN 'skipped' THEN skipped_at END AS at
                FROM background_jobs
                WHERE status IN ('completed', 'failed', 'cancelled', 'skipped')
                UNION ALL
                SELECT queue, type, 'retried', coalesce(error_code, ''), finished_at
                FROM job_executions
                WHERE outcome = 'retry' AND finished_at > now() - interval '8 days'
            ) o
            WHERE at > now() - interval '8 days'
            GROUP BY 1, 2, 3, 4, 5;
        END $$;

        CREATE TRIGGER background_jobs_rollup_insert AFTER INSERT ON background_jobs
            REFERENCING NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_rows();
        CREATE TRIGGER background_jobs_rollup_delete AFTER DELETE ON background_jobs
            REFERENCING OLD TABLE AS old_rows
            FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_rows();
        CREATE TRIGGER background_jobs_rollup_update AFTER UPDATE ON background_jobs
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_update();
        CREATE TRIGGER background_jobs_rollup_truncate AFTER TRUNCATE ON background_jobs
            FOR EACH STATEMENT EXECUTE FUNCTION jobwarden_rollup_truncate();

        -- The overview's "recovered in the last hour" without reading the hour's executions.
        CREATE INDEX job_executions_lost_idx ON job_executions (finished_at)
            WHERE outcome = 'worker_lost';

        SELECT jobwarden_rollup_rebuild();
    """)


def downgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS job_executions_lost_idx;
        DROP TRIGGER IF EXISTS background_jobs_rollup_truncate ON background_jobs;
        DROP TRIGGER IF EXISTS background_jobs_rollup_update ON background_jobs;
        DROP TRIGGER IF EXISTS background_jobs_rollup_delete ON background_jobs;
        DROP TRIGGER IF EXISTS background_jobs_rollup_insert ON background_jobs;
        DROP FUNCTION IF EXISTS jobwarden_rollup_rebuild();
        DROP FUNCTION IF EXISTS jobwarden_rollup_truncate();
        DROP FUNCTION IF EXISTS jobwarden_rollup_update();
        DROP FUNCTION IF EXISTS jobwarden_rollup_rows();
        DROP FUNCTION IF EXISTS jobwarden_rollup_fold();
        DROP TABLE IF EXISTS job_minute_counts;
        DROP TABLE IF EXISTS job_count_deltas;
    """)
