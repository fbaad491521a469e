-- Which migrations a database has had (worker/store/db.py: check_schema, adopt_revisions).
-- Jobwarden keeps its Alembic revision in a table of its own, jobwarden_alembic_version, so
-- an application's own Alembic (Flask-Migrate) keeps Alembic's default table,
-- alembic_version, in the same database. Earlier releases kept the revision there: until
-- `jobwarden migrate` moves it, the code reads it there.

-- name: schema_versioned
-- Which revision tables the database has: Jobwarden's own, and Alembic's default one.
SELECT to_regclass('jobwarden_alembic_version') IS NOT NULL AS own,
       to_regclass('alembic_version') IS NOT NULL AS shared;

-- name: schema_revisions
-- The migration revisions the database is at.
SELECT version_num FROM jobwarden_alembic_version ORDER BY version_num;

-- name: shared_schema_revisions
-- The revisions in Alembic's default table: an earlier Jobwarden's, or the application's.
SELECT version_num FROM alembic_version ORDER BY version_num;

-- name: migrate_lock
-- One `jobwarden migrate` at a time in a database: a second one waits for the first to
-- end, then finds nothing left to do. Held by the session, not the transaction: a
-- migration that builds an index concurrently commits in its middle. Tried, not waited
-- for: a session waiting for a lock holds a snapshot, which that index build would wait
-- for in turn (a deadlock).
SELECT pg_try_advisory_lock(hashtext('jobwarden.migrate'));

-- name: migrate_unlock
-- The migration ended (or failed): the next one may go.
SELECT pg_advisory_unlock(hashtext('jobwarden.migrate'));

-- name: adopt_shared_revisions
-- Alembic's default table held Jobwarden's revisions and nothing else: it becomes
-- Jobwarden's own (its rows and format as they are), and the name is free for the
-- application's Alembic.
ALTER TABLE alembic_version RENAME TO jobwarden_alembic_version;

-- name: create_revision_table
-- Jobwarden's own revision table, as Alembic makes it (for adopt_shared_revisions' other
-- case: alembic_version holds the application's revisions too).
CREATE TABLE jobwarden_alembic_version (
    version_num varchar(32) NOT NULL,
    CONSTRAINT jobwarden_alembic_version_pkc PRIMARY KEY (version_num));

-- name: move_shared_revisions
-- Jobwarden's revisions (`ours`) out of the alembic_version it shared with the
-- application, into its own table; the application's stay.
WITH gone AS (
    DELETE FROM alembic_version WHERE version_num = ANY(%(ours)s::text[])
    RETURNING version_num
)
INSERT INTO jobwarden_alembic_version (version_num) SELECT version_num FROM gone;
