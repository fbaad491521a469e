"""Jobwarden and its peers with workers in network namespaces: a real delay to the
database, and many worker hosts against one PostgreSQL (bench/README.md)."""
