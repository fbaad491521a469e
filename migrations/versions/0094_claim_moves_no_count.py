"""The count rollup counts a running job as pending: a claim's trigger writes nothing.

Revision ID: 0094
Revises: 0093
Create Date: 2026-12-08

Every claim (an UPDATE of `background_jobs` from pending to running) fired
`jobwarden_rollup_update`, whose claim branch inserted count deltas (pending -n,
running +n per queue and type) into `job_count_deltas` and, every 2,000 ids, folded
them: about 0.15 ms of an idle worker's one-job claim, and a microsecond of a drain's
server CPU per job. `job_count_deltas` now counts a running job as `pending`, "not yet
ended", so a claim and a renewal move no count: the trigger reads the statement's rows
and returns. A claim that moves a job into its type's queue (one with 'queue' in
`policy_defaults`) still counts that move. Every writer folds the same way (the
INSERT/DELETE trigger, the update's other statements, the fold, the rebuild); the
outcome rollup reads raw statuses as before. The console's readers that show running
apart (console_counts_by_queue_type, console_status_totals) count running jobs in
`background_jobs` through its partial index of running jobs, at most the fleet's slots,
and take them from pending, in the same snapshot as the rollup.

The upgrade folds the existing `running` rows into `pending`; the downgrade restores the
functions and splits running back out, counted from `background_jobs`.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0094"
down_revision = "0093"
branch_labels = None
depends_on = None

FUNCTIONS = ("jobwarden_rollup_fold", "jobwarden_rollup_rows", "jobwarden_rollup_update",
             "jobwarden_rollup_rebuild")


def upgrade() -> None:
    # No transaction that fired the old functions is still open (a share lock waits for
    # every writer of jobs), so none adds a running row after the fold below.
    op.execute("LOCK TABLE background_jobs IN SHARE MODE")
    for function in FUNCTIONS:
        op.execute(load_sql(function, revision))
    # Only sums matter: the running rows' jobs move to pending of their queue and type.
    op.execute("""
        WITH gone AS (
            DELETE FROM job_count_deltas WHERE status = 'running'
            RETURNING queue, type, jobs
        )
        INSERT INTO job_count_deltas (status, queue, type, jobs)
        SELECT 'pending', queue, type, sum(jobs) FROM gone
        GROUP BY queue, type HAVING sum(jobs) <> 0""")


def downgrade() -> None:
    op.execute(load_sql("jobwarden_rollup_fold", "0092"))
    # Migration 0009's text, with 0067's setting.
    op.execute(load_sql("jobwarden_rollup_rows", "0009"))
    op.execute("ALTER FUNCTION jobwarden_rollup_rows() SET jit = off")
    op.execute(load_sql("jobwarden_rollup_update", "0093"))
    op.execute(load_sql("jobwarden_rollup_rebuild", "0081"))
    # The running jobs, counted where they are, leave pending for running. The share lock
    # keeps a claim from moving a job between the count and the commit.
    op.execute("LOCK TABLE background_jobs IN SHARE MODE")
    op.execute("""
        INSERT INTO job_count_deltas (status, queue, type, jobs)
        SELECT s.status, r.queue, r.type, s.sign * r.jobs
        FROM (SELECT queue, type, count(*) AS jobs FROM background_jobs
              WHERE status = 'running' GROUP BY queue, type) r
        CROSS JOIN (VALUES ('running', 1), ('pending', -1)) AS s (status, sign)""")
