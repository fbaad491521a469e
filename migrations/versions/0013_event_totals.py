"""Totals of rare runtime events per job type: recovered and zombie executions.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-30

`GET /metrics` exposes them as Prometheus counters (`jobwarden_recovered_total`,
`jobwarden_zombie_rejected_total`). They cannot be counted from `job_executions`:
retention deletes executions, so a count of them shrinks, which Prometheus reads as a
counter reset; and a zombie's refused outcome leaves no row of its own (the recovery
that took its job over already closed its execution as `worker_lost`).

* `recovered` — executions recovery moved on because their lease ran out (added by
  recover_executions in the statement that moves them);
* `zombie_outcome` — an execution whose outcome write found its job owned by another
  execution (the completer's batch, or the handler's business transaction);
* `zombie_lease` — an execution that learned its lease was gone before it finished
  (a heartbeat, or the handler's own progress or effect write), its result discarded.

Rows are only written when such an event happens: nothing on the path of an execution
that owns its job.
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE job_event_totals (
            event text NOT NULL,
            type text NOT NULL,
            total bigint NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (event, type),
            CONSTRAINT job_event_totals_event_check
                CHECK (event IN ('recovered', 'zombie_outcome', 'zombie_lease'))
        );
    """)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS job_event_totals;")
