"""An index on `job_audit.request_id`, for the double-submission check.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30

Every operator action that carries a request id (every console form) first looks for
an audit row the same form wrote earlier (`operator_audit_by_request` in
worker/store/sql/operations.sql). Audit rows are never deleted by retention, so without an
index that look-up reads the whole audit log on each click (140 ms at a million rows).
It holds the look-up's other equalities (actor, action) too: few people act, so actor
alone says little, and a planner without column statistics would otherwise AND in the
actor index and read it whole (40 ms); with them, 0.1 ms. Partial: rows written by the
command line carry no request id.
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX job_audit_request_idx ON job_audit (request_id, actor, action) "
               "WHERE request_id IS NOT NULL;")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS job_audit_request_idx;")
