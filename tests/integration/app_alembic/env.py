"""An application's own Alembic environment, in the database Jobwarden uses
(tests/integration/test_revision_table.py; docs/guide/flask.md quotes it)."""

from alembic import context
from sqlalchemy import create_engine, pool

from jobwarden.app_migrations import include_name

target_metadata = None
url = context.config.get_main_option("sqlalchemy.url")
with create_engine(url, poolclass=pool.NullPool).connect() as conn:
    context.configure(connection=conn, target_metadata=target_metadata,
                      include_name=include_name)
    with context.begin_transaction():
        context.run_migrations()
