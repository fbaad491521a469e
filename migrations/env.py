"""Alembic environment: runs migrations online against the resolved database URL.

The migrations create the console's tables too, so autogenerate and `alembic check`
compare the database with both packages' tables: worker/store/schema.py's, and those
console/data/schema.py adds to the same metadata. Applying migrations needs no metadata, and
the runtime's `jobwarden migrate` (jobwarden.worker.store.db.alembic_config) says so with
`attributes["upgrade_only"]`: a worker never loads the console.
"""

import time

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from jobwarden.worker.store.db import VERSION_TABLE, adopt_revisions, database_url, sqlalchemy_url
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q
from jobwarden.worker.store.schema import declared, metadata

config = context.config
#: How often a `jobwarden migrate` tries again for the lock another one holds.
LOCK_POLL_SECONDS = 0.2


def target_metadata():
    """What the database is compared with: None when only applying migrations."""
    if config.attributes.get("upgrade_only"):
        return None
    # declares the console's tables on `metadata`
    import jobwarden.console.data.schema  # noqa: F401

    return metadata


def run_migrations(conn: Connection) -> None:
    """Under the migration lock, taken before the revision is read: of two `jobwarden
    migrate` at once, the second waits, then reads the revision the first wrote. The
    revision is Jobwarden's own table's (db.VERSION_TABLE), an earlier release's moved
    there first (db.adopt_revisions)."""
    context.configure(connection=conn, target_metadata=target_metadata(),
                      include_name=declared, version_table=VERSION_TABLE)
    store = JobStore(conn)
    # Each try a transaction of its own, so a waiting migrate holds no snapshot between
    # tries (revisions.sql, migrate_lock).
    while not store.one(Q.migrate_lock)[0]:
        conn.commit()
        time.sleep(LOCK_POLL_SECONDS)
    conn.commit()
    try:
        with context.begin_transaction():
            adopt_revisions(store)
            context.run_migrations()
    finally:
        store.rows(Q.migrate_unlock)
        conn.commit()


def run_migrations_online() -> None:
    url = config.attributes.get("url") or sqlalchemy_url(database_url())
    connection = config.attributes.get("connection")
    if connection is not None:
        run_migrations(connection)
        return
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        run_migrations(conn)


run_migrations_online()
