"""A kept job keeps every attempt; a bulk action keeps to each job's status at its review.

Revision ID: 0071
Revises: 0070
Create Date: 2026-12-06

History. Retention keeps a job by the moment it reached its current status (migration
0017), but dropped a week of its history (`jobwarden_drop_execution_partitions`,
migration 0066) on the week's own age: a job an operator retried weeks after it failed,
then failed again or completed, lost its first attempts while the job itself was kept.
Now a week past the history's age is dropped only when no job still in background_jobs
has an execution in it (whatever its status: retention has deleted every job it does not
keep, in the same pass, before it drops weeks); such a week waits whole until those jobs
go. The rows are not moved out instead: a week's range has no other partition to take
them (the default's CHECK bounds it below the cutover, and widening it would make every
new week scan the default), and moving is the per-row DELETE and WAL that partitioning
exists to avoid. Only a job whose life spans more than the history's age (retried long
after failing, unknown for months) holds a week, so few do; the worst case, one such job
holds one week (and every deleted job's rows in it) for as long as it is kept.

The check reads indexes only, never the week whole: the week's lowest and highest job id
(its job index, from either end), then each live job in that id range, by the primary
key, probes the week's job index once (a LATERAL with LIMIT, which the planner cannot
turn into a hash join over the week). Live jobs in a week's id range were created before
the week ended: few, with retention working. A week of 1,000,000 executions with 50,000
live jobs in its id range, none of them in it (every probe a miss), was checked and
dropped in 91-125 ms (three runs on the shared test server, 2026-12-06), reading neither
table whole. tests/integration/test_history_partitions.py.

Selections. `console_selection_jobs` gains `statuses`: each selected job's status when
the selection was stored, in the same places as `job_ids`. A bulk action compared a job
with every status the action may start from, so a skip reviewed as "failed" also skipped
jobs another operator had retried meanwhile (pending, which a skip allows); now each chunk
acts on a job only in the status the review showed (worker/store/sql/operations.sql,
tests/integration/test_bulk_after_review.py). A selection stored before this migration
has no statuses: its jobs are compared as before. Adding a nullable column rewrites
nothing.
"""

import importlib.util
from pathlib import Path

from alembic import op

revision = "0071"
down_revision = "0070"
branch_labels = None
depends_on = None


def _migration(name: str):
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"jobwarden_migration_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Migration 0066's functions, of which the drop is redefined here (and given back on
#: downgrade).
PREVIOUS = _migration("0066_partitioned_executions.py").FUNCTIONS
PREVIOUS_DROP = PREVIOUS[PREVIOUS.index("-- Drop every week whose rows"):]
assert "CREATE OR REPLACE FUNCTION jobwarden_drop_execution_partitions" in PREVIOUS_DROP

DROP_PARTITIONS = """
-- Drop every week whose rows all finished more than `keep` ago (its end is past the age:
-- not its start, or rows up to seven days younger would go), unless a job still in
-- background_jobs has an execution in it (migration 0071: a job retention keeps keeps all
-- its attempts; pending, running and unknown jobs are kept that way too). Returns the
-- names dropped. The default partition is never dropped: it is the table from before the
-- partitioning, whose rows retention deletes with their jobs, and the place for rows no
-- week holds. A DROP takes a short ACCESS EXCLUSIVE lock on job_executions: a lock_timeout
-- keeps it from queueing long in front of the history's writes (the caller tries again
-- next pass).
CREATE OR REPLACE FUNCTION jobwarden_drop_execution_partitions(keep interval)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    p record;
    lo bigint;
    hi bigint;
    kept bool;
BEGIN
    PERFORM set_config('lock_timeout', '2s', true);
    PERFORM pg_advisory_xact_lock(hashtext('jobwarden.partitions'));
    FOR p IN SELECT * FROM jobwarden_execution_partitions()
             WHERE NOT is_default AND week_end <= now() - keep LOOP
        -- The week's job ids, from both ends of its job index.
        EXECUTE format('SELECT min(job_id), max(job_id) FROM %I', p.name) INTO lo, hi;
        -- Each live job in that range probes the week's job index once; the LIMIT keeps
        -- the probe a parameterised index scan, never a hash of the whole week.
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM background_jobs j '
                       'CROSS JOIN LATERAL (SELECT 1 FROM %I e WHERE e.job_id = j.id '
                       'LIMIT 1) hit WHERE j.id BETWEEN $1 AND $2)', p.name)
            INTO kept USING lo, hi;
        IF NOT coalesce(kept, false) THEN
            EXECUTE format('DROP TABLE IF EXISTS %I', p.name);
            RETURN NEXT p.name;
        END IF;
    END LOOP;
END $$;
"""


def upgrade() -> None:
    op.execute(DROP_PARTITIONS)
    op.execute("ALTER TABLE console_selection_jobs ADD COLUMN statuses text[]")


def downgrade() -> None:
    op.execute("ALTER TABLE console_selection_jobs DROP COLUMN IF EXISTS statuses")
    op.execute(PREVIOUS_DROP)
