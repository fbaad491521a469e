"""A job's payload is checked where it is written, not at every update of its row.

Revision ID: 0096
Revises: 0095
Create Date: 2026-12-08

`background_jobs_payload_check` (migration 0001) held `jsonb_typeof(payload) = 'object'`.
PostgreSQL evaluates a CHECK constraint at every UPDATE of a row, whichever columns it
sets, and `jsonb_typeof` detoasts the payload: a claim, a finish, each heartbeat and
progress save read a payload above 2 KB (once compressed) back from its TOAST table.
With 8 KB payloads that was a fifth to a quarter of a job's server CPU (98.7 and 102.4
against 74.3 and 81.4 µs a job in two runs of `bench/bench_cost.py --payload-bytes
8000`; docs/benchmarks.md, "A payload's check").

The same rule now runs only where a payload is written: after each INSERT statement,
over its new rows (a row trigger cost a bulk enqueue about a tenth more), and before
each row of an UPDATE that sets `payload` (a replace by unique key). It raises what the
constraint raised: check_violation (23514), naming `background_jobs_payload_check`.
Rows are not read again: each was checked when it was written.
"""

from alembic import op

from jobwarden.worker.store.schema_sql import load_sql

revision = "0096"
down_revision = "0095"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(load_sql("jobwarden_payload_object", revision))
    op.execute(load_sql("payload_triggers", revision))
    op.execute("ALTER TABLE background_jobs DROP CONSTRAINT background_jobs_payload_check")


def downgrade() -> None:
    # NOT VALID: the rows were checked as they were written; validating would read every
    # payload under a lock that blocks writes.
    op.execute("ALTER TABLE background_jobs ADD CONSTRAINT background_jobs_payload_check "
               "CHECK (jsonb_typeof(payload) = 'object') NOT VALID")
    op.execute("DROP TRIGGER background_jobs_payload_insert ON background_jobs")
    op.execute("DROP TRIGGER background_jobs_payload_update ON background_jobs")
    op.execute("DROP FUNCTION jobwarden_payload_object()")
