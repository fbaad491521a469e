"""For an application's own Alembic (Flask-Migrate) in the database Jobwarden uses:
`include_name`, which leaves Jobwarden's tables out of the application's autogenerate,
so `flask db migrate` never writes a migration that drops them. `jobwarden migrate`
keeps them, and its revision is in a table of its own (jobwarden_alembic_version).

    # the application's migrations/env.py
    from jobwarden.app_migrations import include_name

    context.configure(connection=connection, target_metadata=target_metadata,
                      include_name=include_name)
"""

from __future__ import annotations

import functools


@functools.cache
def jobwarden_tables() -> frozenset[str]:
    """The tables `jobwarden migrate` makes: the runtime's, the console's, its revision's."""
    import jobwarden.console.data.schema  # noqa: F401  (adds the console's tables)
    from jobwarden.worker.store.db import VERSION_TABLE
    from jobwarden.worker.store.schema import metadata

    return frozenset({*metadata.tables, VERSION_TABLE})


def include_name(name: str | None, type_: str, parent_names: object = None) -> bool:
    """Alembic's `include_name`: every name but Jobwarden's tables (and what they hold, which
    Alembic then never visits) and its history's weekly partitions."""
    from jobwarden.worker.store.schema import declared

    if type_ != "table" or name is None:
        return True
    return name not in jobwarden_tables() and declared(name, type_)
