"""The trace context a job was enqueued in.

Revision ID: 0084
Revises: 0082
Create Date: 2026-12-06

With OpenTelemetry's API installed and a trace current at enqueue, the job keeps the W3C
trace context (`traceparent`, and `tracestate` if any) as the JSON object the propagator
wrote (worker/core/tracing.py): its first execution's span is a child of that span, and a
retry's links to it. NULL for a job enqueued outside any trace, or without the package.
Added without a default: no table rewrite, nothing for the hot path to write.
"""

from alembic import op

revision = "0084"
down_revision = "0082"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS trace_context text")


def downgrade() -> None:
    op.execute("ALTER TABLE background_jobs DROP COLUMN IF EXISTS trace_context")
