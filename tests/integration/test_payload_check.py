"""A job's payload is a JSON object, checked where a payload is written (each INSERT
statement's new rows, each row of an UPDATE that sets it) by triggers (migration 0096,
sql/schema/payload.sql), with the error the CHECK constraint before them raised; an
update that sets other columns (a claim, a finish, a heartbeat) never reads the payload."""

from __future__ import annotations

import psycopg
import pytest

from tests.helpers import scalar

CONSTRAINT = "background_jobs_payload_check"
INSERT = "INSERT INTO background_jobs (type, payload) VALUES ('t', %s::jsonb)"


@pytest.mark.parametrize("payload, kind", [("[1, 2]", "array"), ('"text"', "string"),
                                           ("42", "number"), ("null", "null"),
                                           ("true", "boolean")])
def test_an_insert_of_a_payload_that_is_not_an_object_is_refused(clean_db, payload, kind):
    with psycopg.connect(clean_db) as conn, \
            pytest.raises(psycopg.errors.CheckViolation) as refused:
        conn.execute(INSERT, [payload])
    assert refused.value.diag.constraint_name == CONSTRAINT
    assert refused.value.diag.table_name == "background_jobs"
    message = refused.value.diag.message_primary
    assert message == f"a job's payload must be a JSON object, not {kind}"
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


def test_objects_are_stored_and_one_bad_row_refuses_its_whole_statement(clean_db):
    with psycopg.connect(clean_db) as conn:
        conn.execute(INSERT, ['{}'])
        conn.execute(INSERT, ['{"to": "ops@example.com", "items": [1, 2]}'])
        conn.commit()
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO background_jobs (type, payload) "
                         "SELECT 't', p FROM unnest(ARRAY['{}', '[]', '{}']::jsonb[]) AS p")
        conn.rollback()
        # COPY, as a bulk loader writes, takes the same check.
        with pytest.raises(psycopg.errors.CheckViolation), \
                conn.cursor().copy("COPY background_jobs (type, payload) FROM STDIN") as copy:
            copy.write_row(("t", "{}"))
            copy.write_row(("t", "[3]"))
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 2


def test_an_update_that_sets_the_payload_is_checked(clean_db):
    with psycopg.connect(clean_db) as conn:
        job_id = conn.execute(INSERT + " RETURNING id", ['{"a": 1}']).fetchone()[0]
        conn.commit()
        with pytest.raises(psycopg.errors.CheckViolation) as refused:
            conn.execute("UPDATE background_jobs SET payload = '[1]', priority = 5 "
                         "WHERE id = %s", [job_id])
        assert refused.value.diag.constraint_name == CONSTRAINT
        conn.rollback()
        conn.execute("UPDATE background_jobs SET payload = '{\"a\": 2}' WHERE id = %s",
                     [job_id])
        conn.commit()
    assert scalar(clean_db, "SELECT payload FROM background_jobs") == {"a": 2}


def test_an_update_of_other_columns_does_not_read_the_payload(clean_db):
    """The point of the trigger: a CHECK constraint ran at every update of the row and
    detoasted the payload each time. A row holding what the check refuses (put there
    with the trigger off, as no writer can) is updated like any other."""
    with psycopg.connect(clean_db) as conn:
        conn.execute("ALTER TABLE background_jobs DISABLE TRIGGER background_jobs_payload_insert")
        job_id = conn.execute(INSERT + " RETURNING id", ["[1]"]).fetchone()[0]
        conn.execute("ALTER TABLE background_jobs ENABLE TRIGGER background_jobs_payload_insert")
        conn.execute("UPDATE background_jobs SET status = 'cancelled', cancelled_at = now(), "
                     "priority = 3 WHERE id = %s", [job_id])
        assert conn.execute("SELECT status, payload FROM background_jobs WHERE id = %s",
                            [job_id]).fetchone() == ("cancelled", [1])
        conn.rollback()  # the ALTERs too: the trigger stays as the migration made it
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0
