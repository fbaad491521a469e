"""Jobs that wait for their parents, and the result a job hands on.

Revision ID: 0073
Revises: 0072
Create Date: 2026-12-08

A job enqueued `after=[...]` other jobs is `waiting` until every parent has completed
(docs/guide/flows.md). One row per edge in `job_dependencies`: `run_anyway` releases
the edge whatever final state its parent reaches (a cleanup step), `released_at` marks
an edge whose parent already let its dependent go, so no edge is counted twice (a
parent retried after it failed, a repair that meets a release). The dependent counts
its edges not yet released in `waiting_on`: a release decrements it under the
dependent's row lock, so two parents completing at once in two transactions never
both see the other unfinished. The parent counts its edges in `dependents`: zero for
an ordinary job, so the finish statement's release finds nothing to do for it without
reading `job_dependencies`.

`result` holds what the handler of the completing execution returned (JSON), on the
job row so that retention removes it with its job and a dependent can read it for as
long as its parent exists (the executions' history is dropped by week, on its own).

Plain columns, a table and indexes: no function or trigger. The rollups count jobs by
status whatever the status, so `waiting` needs nothing of theirs.
"""

from alembic import op

revision = "0073"
down_revision = "0072"
branch_labels = None
depends_on = None

STATUSES = ("pending", "running", "completed", "failed", "cancelled", "skipped", "unknown")
CHECK = "background_jobs_status_check"


def _status_check(statuses: tuple[str, ...]) -> None:
    listed = ", ".join(f"'{s}'" for s in statuses)
    op.execute(f"ALTER TABLE background_jobs DROP CONSTRAINT {CHECK}")
    op.execute(f"ALTER TABLE background_jobs ADD CONSTRAINT {CHECK} "
               f"CHECK (status IN ({listed})) NOT VALID")
    with op.get_context().autocommit_block():
        op.execute(f"ALTER TABLE background_jobs VALIDATE CONSTRAINT {CHECK}")


def upgrade() -> None:
    op.execute("""
        ALTER TABLE background_jobs
            ADD COLUMN waiting_on integer NOT NULL DEFAULT 0,
            ADD COLUMN dependents integer NOT NULL DEFAULT 0,
            ADD COLUMN result     jsonb;

        CREATE TABLE job_dependencies (
            job_id      bigint      NOT NULL REFERENCES background_jobs (id) ON DELETE CASCADE,
            parent_id   bigint      NOT NULL REFERENCES background_jobs (id) ON DELETE CASCADE,
            run_anyway  boolean     NOT NULL DEFAULT false,
            released_at timestamptz,
            PRIMARY KEY (job_id, parent_id),
            CONSTRAINT job_dependencies_not_self_check CHECK (job_id <> parent_id)
        );
        CREATE INDEX job_dependencies_parent_idx ON job_dependencies (parent_id);
        -- The waiting jobs, for the repair duty and the jobs list (no hot-path job
        -- passes through `waiting`: no entry is written for an ordinary job).
        CREATE INDEX background_jobs_waiting_idx ON background_jobs (id)
            WHERE status = 'waiting';
    """)
    _status_check((*STATUSES, "waiting"))


def downgrade() -> None:
    # A waiting job has no place in the older schema: it becomes pending (it may then run
    # before its parents, which that schema cannot express).
    op.execute("UPDATE background_jobs SET status = 'pending' WHERE status = 'waiting'")
    _status_check(STATUSES)
    op.execute("""
        DROP INDEX background_jobs_waiting_idx;
        DROP TABLE job_dependencies;
        ALTER TABLE background_jobs DROP COLUMN waiting_on, DROP COLUMN dependents,
            DROP COLUMN result;
    """)
