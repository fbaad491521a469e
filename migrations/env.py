"""Alembic environment: runs migrations online against the resolved database URL."""

from alembic import context
from sqlalchemy import create_engine, pool

from worker.db import database_url, sqlalchemy_url
from worker.schema import metadata

config = context.config
target_metadata = metadata


def run_migrations_online() -> None:
    url = config.attributes.get("url") or sqlalchemy_url(database_url())
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
