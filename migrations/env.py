"""Alembic environment: runs migrations online against the resolved database URL.

The migrations create the console's tables too, so autogenerate and `alembic check`
compare the database with both packages' tables: worker/store/schema.py's, and those
console/data/schema.py adds to the same metadata. Applying migrations needs no metadata, and
the runtime's `jobwarden migrate` (jobwarden.worker.store.db.alembic_config) says so with
`attributes["upgrade_only"]`: a worker never loads the console.
"""

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from jobwarden.worker.store.db import (
    VERSION_TABLE,
    adopt_revisions,
    connect_kwargs,
    database_url,
    migration_lock,
    sqlalchemy_url,
)
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.schema import declared, metadata

config = context.config


def target_metadata():
    """What the database is compared with: None when only applying migrations."""
    if config.attributes.get("upgrade_only"):
        return None
    # declares the console's tables on `metadata`
    import jobwarden.console.data.schema  # noqa: F401

    return metadata


def run_migrations(conn: Connection) -> None:
    """Under the migration lock, taken before the revision is read (db.migration_lock).
    The revision is Jobwarden's own table's (db.VERSION_TABLE), an earlier release's moved
    there first (db.adopt_revisions)."""
    context.configure(connection=conn, target_metadata=target_metadata(),
                      include_name=declared, version_table=VERSION_TABLE)
    with migration_lock(conn), context.begin_transaction():
        adopt_revisions(JobStore(conn))
        context.run_migrations()


def run_migrations_online() -> None:
    url = config.attributes.get("url") or sqlalchemy_url(database_url())
    connection = config.attributes.get("connection")
    if connection is not None:
        run_migrations(connection)
        return
    # The runtime's connection options: behind a transaction pooler, no server-side
    # prepared statements (the lock's tries would make one).
    engine = create_engine(url, poolclass=pool.NullPool, connect_args=connect_kwargs())
    with engine.connect() as conn:
        run_migrations(conn)


run_migrations_online()
