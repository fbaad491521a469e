"""Snooze: an execution may put its job off without spending an attempt.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01

`raise Snooze(seconds)` (or `ctx.snooze(seconds)`) ends an execution with the outcome
`snoozed`: the job goes back to `pending` for that long, its attempt given back
(worker/core/transitions.py). `background_jobs.snoozes` counts them, so a type's
`max_snoozes` can stop a job that would snooze for ever; a default of 0 is a
catalogue-only change (PostgreSQL 11+ stores it without rewriting the table).

The rollups count a snooze as itself (`snoozed`, no error code), never as a retry: the
trigger of migration 0018 reads the execution's recorded outcome for every move from
`running` to `pending` already, and now tells the three kinds apart (retried, snoozed,
handed back). The outcome's CHECK gains the value, added NOT VALID and validated outside
the migration's transaction (as in 0020: workers keep writing meanwhile).
"""

import importlib.util
from pathlib import Path

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

CHECK = "job_executions_outcome_check"
OUTCOMES = ("completed", "retry", "failed", "skipped", "cancelled", "unknown", "worker_lost",
            "timeout", "handed_back")


#: The update trigger's function as this migration writes it (migration 0068 restores it
#: on its way down).
ROLLUP_UPDATE = """
        CREATE OR REPLACE FUNCTION jobwarden_rollup_update() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            first_id bigint;
            last_id bigint;
        BEGIN
            WITH moved AS (
                SELECT o.status AS old_status, n.status AS new_status,
                       o.queue AS old_queue, n.queue AS new_queue,
                       o.type AS old_type, n.type AS new_type,
                       n.last_error_code AS error_code,
                       -- How the execution that left `running` for `pending` ended, as
                       -- the same statement recorded it (NULL: no execution row).
                       CASE WHEN o.status = 'running' AND n.status = 'pending' THEN
                           (SELECT e.outcome FROM job_executions e
                            WHERE e.execution_id = o.execution_id) END AS execution_outcome
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
                       CASE WHEN new_status <> 'pending' THEN new_status
                            WHEN execution_outcome = 'snoozed' THEN 'snoozed'
                            ELSE 'retried' END,
                       CASE WHEN new_status IN ('failed', 'unknown')
                              OR (new_status = 'pending'
                                  AND execution_outcome IS DISTINCT FROM 'snoozed')
                            THEN coalesce(error_code, '') ELSE '' END,
                       count(*)
                FROM moved
                WHERE old_status <> new_status
                  AND (new_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
                       OR (old_status = 'running' AND new_status = 'pending'
                           AND execution_outcome IS DISTINCT FROM 'handed_back'))
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
"""


def _outcome_check(outcomes: tuple[str, ...]) -> None:
    listed = ", ".join(f"'{o}'" for o in outcomes)
    op.execute(f"ALTER TABLE job_executions DROP CONSTRAINT IF EXISTS {CHECK}")
    op.execute(f"ALTER TABLE job_executions ADD CONSTRAINT {CHECK} "
               f"CHECK (outcome IS NULL OR outcome IN ({listed})) NOT VALID")
    with op.get_context().autocommit_block():
        op.execute(f"ALTER TABLE job_executions VALIDATE CONSTRAINT {CHECK}")


def upgrade() -> None:
    op.execute("ALTER TABLE background_jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0")
    op.execute(ROLLUP_UPDATE)
    _outcome_check((*OUTCOMES, "snoozed"))


def downgrade() -> None:
    op.execute("DELETE FROM job_minute_counts WHERE outcome = 'snoozed'")
    op.execute("UPDATE job_executions SET outcome = 'retry' WHERE outcome = 'snoozed'")
    _outcome_check(OUTCOMES)
    # The trigger as migration 0018 wrote it.
    path = Path(__file__).with_name("0018_rollup_execution_outcome.py")
    spec = importlib.util.spec_from_file_location("jobwarden_migration_0018", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.upgrade()
    op.execute("ALTER TABLE background_jobs DROP COLUMN snoozes")
