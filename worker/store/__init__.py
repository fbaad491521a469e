"""Where the runtime's data lives: the database (URL, embedded server, migrations), the
named SQL and the tables' metadata. Imports only jobwarden.worker.core (docs/architecture.md §1)."""
