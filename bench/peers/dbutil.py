"""The PostgreSQL server side: fresh databases, the server's settings, the machine."""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg

SETTINGS = ("server_version", "shared_buffers", "autovacuum", "synchronous_commit", "fsync",
            "max_connections", "work_mem")


def with_db(url: str, name: str) -> str:
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, "/" + name, p.query, p.fragment))


@contextmanager
def fresh_database(server: str, tag: str):
    """A new database on the server for one scenario of one system; dropped afterwards
    (WITH FORCE: a worker that would not stop cannot keep it alive)."""
    name = f"jwbench_{tag}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_db(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_settings(server: str) -> dict[str, str]:
    with psycopg.connect(server, autocommit=True) as conn:
        out = {s: conn.execute(f"SHOW {s}").fetchone()[0] for s in SETTINGS}
        out["version"] = conn.execute("SELECT version()").fetchone()[0]
    return out


def machine() -> dict[str, object]:
    mem_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    load = os.getloadavg()
    return {"nproc": os.cpu_count(), "memory_gb": round(mem_kb / 1024 / 1024, 1),
            "loadavg_at_start": [round(x, 2) for x in load]}
