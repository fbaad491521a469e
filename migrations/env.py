"""Alembic environment: runs migrations online against the resolved database URL.

The migrations create the console's tables too, so autogenerate and `alembic check`
compare the database with both packages' tables: worker/store/schema.py's, and those
console/data/schema.py adds to the same metadata. Applying migrations needs no metadata, and
the runtime's `jobwarden migrate` (jobwarden.worker.store.db.alembic_config) says so with
`attributes["upgrade_only"]`: a worker never loads the console.
"""

from alembic import context
from sqlalchemy import create_engine, pool

from jobwarden.worker.store.db import database_url, sqlalchemy_url
from jobwarden.worker.store.schema import declared, metadata

config = context.config


def target_metadata():
    """What the database is compared with: None when only applying migrations."""
    if config.attributes.get("upgrade_only"):
        return None
    # declares the console's tables on `metadata`
    import jobwarden.console.data.schema  # noqa: F401

    return metadata


def run_migrations_online() -> None:
    url = config.attributes.get("url") or sqlalchemy_url(database_url())
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata(),
                          include_name=declared)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata(),
                          include_name=declared)
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
