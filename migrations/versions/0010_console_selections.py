"""Console selections: the exact jobs a bulk action was previewed on, held by the server.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30

An operator ticks jobs (or "all matching the filter") and reviews the set before acting.
The set is stored here when it is reviewed; the confirming form carries only the
selection's id, so a stale or edited form cannot widen what the action touches. A
selection is used once (`used_at`, set by compare-and-set in the action's transaction)
and only by the operator who made it.

Also two indexes the console's reads need at ten million jobs: the audit log's summary
of one bulk action, and the jobs list filtered by error code.
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE console_selections (
            id          uuid PRIMARY KEY,
            actor       text NOT NULL,
            action      text NOT NULL,
            job_ids     bigint[] NOT NULL,
            description text NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            used_at     timestamptz,
            CONSTRAINT console_selections_action_check
                CHECK (action IN ('retry', 'cancel', 'skip', 'mark_completed', 'mark_failed'))
        );
        -- The audit log's summary of one bulk action (actor, reason, count).
        CREATE INDEX job_audit_bulk_idx ON job_audit (bulk_id) WHERE bulk_id IS NOT NULL;
        -- The jobs list filtered by error code, newest first: without it, a code whose jobs
        -- are old walks the primary key back through millions of newer jobs (3 s at 10M).
        CREATE INDEX background_jobs_error_code_idx ON background_jobs (last_error_code, id)
            WHERE last_error_code IS NOT NULL;
    """)


def downgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS background_jobs_error_code_idx;
        DROP INDEX IF EXISTS job_audit_bulk_idx;
        DROP TABLE IF EXISTS console_selections;
    """)
