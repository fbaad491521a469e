"""The update trigger counts a claim (or a renewal) with one insert.

Revision ID: 0068
Revises: 0067
Create Date: 2026-12-03

Every claim fires `jobwarden_rollup_update` (migration 0021's text, 0067's `SET jit =
off`), and its one statement does everything any UPDATE of `background_jobs` may need:
the moves by (status, queue, type), the outcome lookup on `job_executions` for a row that
went back to pending, and the minute rollup's upsert. A claim needs only the first: every
row it leaves is `running`, so no execution ended in it, and the outcome part's WHERE
keeps nothing (it counts only rows that reached a settled status or went back to
pending). The same holds for a heartbeat's or progress save's renewal, which moves
nothing at all.

So when no new row is anything but `running`, the function writes the count deltas
alone, in a statement of its own with none of the rest to set up. After an idle spell
that took 0.13 ms off a one-job claim's round trip (from 1.90 to 1.77 ms at the median,
200 claims alternating with the old function; bench/README.md, "Enqueue→start tail").
Every other statement runs migration 0021's statement unchanged, and both paths fold
the deltas as before (tests/integration/test_rollups.py checks the counts after claims,
renewals, completions, retries, hand-backs and moves by hand).
"""

import importlib.util
from pathlib import Path

from alembic import op

revision = "0068"
down_revision = "0067"
branch_labels = None
depends_on = None


def _migration(name: str):
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"jobwarden_migration_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Migration 0021's function, as it stays for every statement but a claim or a renewal.
PREVIOUS = _migration("0021_snooze.py").ROLLUP_UPDATE
#: Its one statement: the moves, the outcome lookup, the minute upsert.
EVERY_UPDATE = PREVIOUS[PREVIOUS.index("WITH moved AS ("):
                        PREVIOUS.index("FROM ins;") + len("FROM ins;")]

ROLLUP_UPDATE = """
    CREATE OR REPLACE FUNCTION jobwarden_rollup_update() RETURNS trigger LANGUAGE plpgsql
    SET jit = off AS $$
    DECLARE
        first_id bigint;
        last_id bigint;
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status <> 'running') THEN
            -- A claim or a renewal: no execution ended here, only the counts move.
            WITH moved AS (
                SELECT o.status AS old_status, n.status AS new_status,
                       o.queue AS old_queue, n.queue AS new_queue,
                       o.type AS old_type, n.type AS new_type
                FROM old_rows o JOIN new_rows n USING (id)
                WHERE (o.status, o.queue, o.type) IS DISTINCT FROM (n.status, n.queue, n.type)
            ), ins AS (
                INSERT INTO job_count_deltas (status, queue, type, jobs)
                SELECT status, queue, type, sum(d)
                FROM (SELECT new_status, new_queue, new_type, 1 FROM moved
                      UNION ALL
                      SELECT old_status, old_queue, old_type, -1 FROM moved)
                     AS deltas (status, queue, type, d)
                GROUP BY status, queue, type HAVING sum(d) <> 0
                RETURNING id
            )
            SELECT min(id), max(id) INTO first_id, last_id FROM ins;
        ELSE
            """ + EVERY_UPDATE + """
        END IF;
        -- Fold when this statement's ids crossed a multiple of 2000.
        IF last_id / 2000 > (first_id - 1) / 2000 THEN
            PERFORM jobwarden_rollup_fold();
        END IF;
        RETURN NULL;
    END $$;
"""


def upgrade() -> None:
    op.execute(ROLLUP_UPDATE)


def downgrade() -> None:
    # The function as migration 0021 wrote it, with 0067's setting.
    op.execute(PREVIOUS)
    op.execute("ALTER FUNCTION jobwarden_rollup_update() SET jit = off")
