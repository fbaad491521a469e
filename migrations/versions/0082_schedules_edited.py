"""Schedules edited from the console: the code's declaration kept beside a console edit.

Revision ID: 0082
Revises: 0081
Create Date: 2026-12-06

`job_schedules` holds what the scheduler runs (cron, timezone, catch_up, payload). A
console edit (worker/ops/schedule_edits.py) replaces those and sets `edited_by` and
`edited_at`: while they are set, a worker publishing its code's declaration writes it
to `declared` only, so the console edit wins until an admin removes it, and then the
row goes back to `declared`. `declared` is NULL for a schedule no code declares (added
in the console). `revision` is what an edit or a removal compares and sets: two admins
editing one schedule, the second is refused instead of overwriting what it never saw.
"""

from alembic import op

revision = "0082"
down_revision = "0081"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        ALTER TABLE job_schedules
            ADD COLUMN declared  jsonb,
            ADD COLUMN edited_by text,
            ADD COLUMN edited_at timestamptz,
            ADD COLUMN revision  integer NOT NULL DEFAULT 1
    """)
    # Every row so far was published from code: that is its declaration.
    op.execute("""
        UPDATE job_schedules
        SET declared = jsonb_build_object('cron', cron, 'timezone', timezone,
                                          'catch_up', catch_up, 'payload', payload)
    """)


def downgrade() -> None:
    # Schedules that exist only in the console would outlive their meaning: drop them;
    # console edits of declared ones go back to the declaration.
    op.execute("DELETE FROM job_schedules WHERE declared IS NULL")
    op.execute("""
        UPDATE job_schedules
        SET cron = declared->>'cron', timezone = declared->>'timezone',
            catch_up = (declared->>'catch_up')::boolean, payload = declared->'payload'
        WHERE edited_by IS NOT NULL
    """)
    op.execute("""
        ALTER TABLE job_schedules
            DROP COLUMN declared, DROP COLUMN edited_by, DROP COLUMN edited_at,
            DROP COLUMN revision
    """)
